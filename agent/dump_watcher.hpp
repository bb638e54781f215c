// The I/O edge of the flight-recorder dump wait: asks a rank's NCCL flight recorder for a dump
// (a write to the pipe its process group made) and then looks at the asked dumps' files every
// 100 ms on a Clock timer, feeding their sizes to a DumpWait (pure), until every dump is written
// or the deadline passes; never blocks the io thread. Owned by the WorkerGroup of a round (and
// later by whoever asks other nodes' ranks); io thread only.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/flight_recorder_dumps.hpp"
#include "common/clock.hpp"

namespace cohort {

/// Asks for a dump: writes to `pipe` if it is a FIFO that a reader holds open (so never
/// blocks). False when there is no such pipe: the worker made none, nothing was asked.
bool request_nccl_dump(const std::string& pipe);

/// The stamp of the regular file at `path`; none when there is none.
std::optional<FileStamp> file_stamp(const std::string& path);
/// The size of the regular file at `path` when it was written since `before` was taken (its
/// stamp differs, or there was no file then); none otherwise.
std::optional<uint64_t> fresh_file_bytes(const std::string& path,
                                         const std::optional<FileStamp>& before);

class DumpWatcher {
 public:
  using Done = std::function<void(std::vector<FlightRecorderDump>)>;

  explicit DumpWatcher(Clock& clock);
  DumpWatcher(const DumpWatcher&) = delete;
  DumpWatcher& operator=(const DumpWatcher&) = delete;

  /// Waits for `asked` (asked just now) for at most `timeout`; `done` runs once, from the timer,
  /// with what was found. Nothing asked: `done` runs at once.
  void start(std::vector<FlightRecorderDump> asked, SteadyDuration timeout, Done done);
  bool waiting() const { return wait_.has_value(); }
  /// Ctrl-Z paused the node: the wait goes on for what was left of it.
  void postpone(SteadyDuration paused);
  /// Ends a wait early (the group stops): one last look, and what was found; `done` never runs.
  std::vector<FlightRecorderDump> cut_short();

 private:
  void look(SteadyTime now);
  void poll();

  Clock& clock_;
  std::unique_ptr<Timer> timer_;
  std::optional<DumpWait> wait_;
  Done done_;
};

}  // namespace cohort
