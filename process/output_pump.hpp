// Copies one worker stream (a pipe) line by line to the console, with a prefix, and/or to a log
// file, the lines that contain a filter also to a shared "filtered" file (torchrun's
// --duplicate-*-filters), and keeps the last lines for the failure summary. Console lines go
// whole through the console queue (common/console.hpp), so lines of different workers never split
// or interleave, and the pump reads no more while that queue is backed up (the worker then waits
// in write(), as it would on a console that does not read). A '\r' ends a piece of a line as
// '\n' ends a line (a progress bar redraws live, each piece prefixed), and the start of a line
// whose worker then stays silent for kIdleFlush is shown as it is, the rest following without a
// second prefix (not when relaying a launched host's lines); a line over kMaxLineBytes goes out
// in pieces as it comes, still one line (one prefix, one end). Owned by WorkerGroup and Launch; io
// thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

struct PumpTarget {
  int console_fd = -1;  ///< -1: not shown on the console
  int file_fd = -1;     ///< -1: no log file (the pump does not own it)
  std::string prefix;   ///< put before every console line
  /// Lines that already start with this (when not empty) reach the console without `prefix`
  /// (cohort launch: a remote worker's "[host:rank]:" lines, but not the agent's own messages).
  std::string prefixed_marker;
  std::string file_path;  ///< file_fd's path, for the warning when a write fails (a full disk)
  int copy_fd = -1;       ///< -1: none; else lines matching a filter, prefixed
  std::string copy_path;  ///< copy_fd's path
  std::vector<std::string> copy_filters;  ///< substrings; a line containing one is copied
  /// Runs for every read that brought output (a sign of life for hang detection); may be empty.
  std::function<void()> on_output;
  /// When not empty, the first line that holds this is not output: what follows it goes to
  /// on_ready (cohort launch: a remote agent's "cohort-ready" line, maybe labelled by srun).
  std::string ready_prefix;
  std::function<void(std::string_view rest)> on_ready;
  /// Console lines wait (up to kMaxHeldBytes) until release(); drop_held() forgets them.
  bool held = false;
};

class OutputPump : public std::enable_shared_from_this<OutputPump> {
 public:
  static constexpr size_t kTailLines = 20;
  static constexpr size_t kMaxLineBytes = 64 * 1024;
  /// How long the start of a line waits for its end before it is shown as it is.
  static constexpr std::chrono::milliseconds kIdleFlush{100};

  /// Takes ownership of `pipe_read`. `on_eof` runs once the writer side is closed everywhere.
  OutputPump(boost::asio::io_context& io, int pipe_read, PumpTarget target);
  /// Starts reading; "${pid}" in the prefix becomes `pid` (the worker's, known only now).
  void start(std::function<void()> on_eof, int pid = 0);
  /// Stops reading (used when a worker's stray children keep the pipe open too long).
  void close();
  /// The writer has exited: what is left in the pipe is read on even while the console lags
  /// (up to console::kMaxQueuedBytes queued), so that its end of file comes soon.
  void read_to_end();
  const std::deque<std::string>& tail() const { return tail_; }
  /// A held pump's lines reach the console, and every line after them.
  void release();
  /// A held pump forgets its lines, and every line after them.
  void drop_held();
  static constexpr size_t kMaxHeldBytes = 64 * 1024;
  /// From now on keeps every line (up to kMaxCaptureBytes), not only the tail: what a hung
  /// worker prints while it is stopped (a Python traceback of every thread).
  void start_capture() { capturing_ = true; }
  const std::string& captured() const { return captured_; }
  static constexpr size_t kMaxCaptureBytes = 1024 * 1024;

 private:
  void read_more();
  void wait_for_console();
  void finish();
  void consume(const char* data, size_t size);
  void append_partial(std::string_view piece);
  void flush_partial();
  /// A line (or, ended by '\r', a redrawn piece of one) to every output.
  /// A piece of a line longer than kMaxLineBytes: the rest of the line follows.
  static constexpr char kNoLineEnd = '\0';
  void emit(std::string_view line, char terminator = '\n');
  bool writer_may_be_blocked();
  /// What of `line` is not out yet, then `end`, to the console (prefixed at the line's start)
  /// and the file.
  void show(std::string_view line, std::string_view end);
  /// The "\n" of a "\r\n", the piece before it already out.
  void end_carriage_return();
  /// Where console output goes now (the held lines, or the batch); nullptr for none.
  std::string* console_out();
  void keep_in_tail(std::string_view line, bool redrawn);
  void arm_idle_flush();
  void show_partial();
  void write_out();
  /// Writes `batch` to a log file; the first write that fails (a full disk, a quota) is said
  /// once, naming `path`.
  void write_file(int fd, const std::string& path, const std::string& batch, bool& failed);

  boost::asio::posix::stream_descriptor pipe_;
  boost::asio::steady_timer pace_timer_;
  boost::asio::steady_timer idle_timer_;  ///< shows a line's start that waits for its end
  bool idle_armed_ = false;
  std::chrono::steady_clock::time_point last_read_;  ///< when output last came
  bool paced_ = false;  ///< reads wait for the console: the worker may not be silent
  size_t pace_bytes_;   ///< reads wait while the console queue holds more than this
  PumpTarget target_;
  std::function<void()> on_eof_;
  static constexpr size_t kReadBytes = 64 * 1024;
  std::unique_ptr<char[]> buffer_;  ///< kReadBytes, left unset: a silent worker's costs no pages
  std::string partial_;
  size_t shown_ = 0;        ///< bytes of partial_ already on the console and in the file
  bool continued_ = false;  ///< the line's earlier pieces are out (it was over kMaxLineBytes)
  bool after_cr_ = false;   ///< the last thing out ended in '\r' (a "\n" may complete it)
  bool tail_open_ = false;  ///< tail_.back() is a piece a '\r' ended: the next one replaces it
  std::string console_batch_;
  std::string file_batch_;
  std::string copy_batch_;
  std::deque<std::string> tail_;
  bool file_failed_ = false;
  bool copy_failed_ = false;
  bool capturing_ = false;
  std::string captured_;
  std::string held_;            ///< console lines waiting for release()
  bool dropping_held_ = false;  ///< held lines are forgotten
};

/// Writes all of `data` to `fd`, retrying on EINTR and short writes (and waiting on EAGAIN);
/// returns 0, or the errno of the write that failed (the rest of `data` is dropped).
int write_all(int fd, std::string_view data);

}  // namespace cohort
