// The event log (docs/EVENTS.md): what happened to a run, one JSON object per line, stamped with
// the wall-clock time, the writer ("daemon" or "agent") and a sequence number. EventLog appends
// each line to a file with one write(2) (O_APPEND: writers sharing a file never interleave inside
// a line, and the line is on disk when the call returns) and/or prints it on stderr (torchrun's
// --event-log-handler console). Owned by its writer (the daemon, an agent); one thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

/// What a writer hands over: the run, the event's name and the event's own fields.
struct Event {
  std::string run;
  std::string name;
  nlohmann::json fields = nlohmann::json::object();
};

/// One of the keys every line starts with (time, t_ms, source, seq, run, event).
bool is_envelope_key(std::string_view key);

/// The event as one line: time, t_ms, source, seq, run and event first, then its fields (in
/// their keys' order; a field under an envelope key is left out, so that no key comes twice);
/// ends in '\n'. Strings are JSON-escaped, so no field can break the line.
std::string format_event_line(const Event& event, std::string_view source, uint64_t seq,
                              int64_t t_ms);

/// Why events could not be appended to `path` (it is created if missing), or "".
std::string event_log_problem(const std::string& path);

/// Milliseconds since the Unix epoch, now (the t_ms of events).
int64_t wall_clock_ms();

class EventLog {
 public:
  explicit EventLog(std::string source) : source_(std::move(source)) {}
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  /// Appends to `path` from now on (created 0600 if missing; a symbolic link there is refused).
  /// "" on success, else why not.
  std::string open(const std::string& path);
  /// Prints every line on stderr too.
  void echo_to_stderr(bool on) { echo_ = on; }
  /// Whether a line goes anywhere (a file is open or stderr echoes).
  bool writes() const { return fd_ >= 0 || echo_; }

  /// Stamps the event (the next seq, `t_ms`) and writes it where configured; returns its line.
  std::string record(const Event& event, int64_t t_ms);
  uint64_t last_seq() const { return seq_; }

 private:
  void append(const std::string& line);

  std::string source_;
  std::string path_;
  int fd_ = -1;
  bool echo_ = false;
  bool write_failed_ = false;  ///< warned once: a full disk must not flood stderr
  uint64_t seq_ = 0;
};

/// Every whole event of `text` (complete JSON objects, each ending in '\n'), in order; a torn
/// last line or a malformed one is skipped.
std::vector<nlohmann::json> parse_event_lines(std::string_view text);
/// The same for the file at `path`; empty when it cannot be read.
std::vector<nlohmann::json> read_event_file(const std::string& path);

}  // namespace cohort
