// Waiting for the NCCL flight recorder's dumps once they were asked for (a write to each rank's
// TORCH_NCCL_DEBUG_INFO_PIPE_FILE pipe): PyTorch writes a dump in place (no temporary file and
// rename) from a monitor thread that polls the pipe, seconds later. A dump is complete when its
// file has held the same, non-zero size for the settle time; the wait ends when every asked
// dump is complete or at a deadline fixed when they were asked (nothing moves it). Keyed by
// global rank, so that one wait can cover any set of ranks. Pure (time passed in); owned by
// whoever waits (DumpWatcher); io thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.hpp"

namespace cohort {

/// What tells one file's content from another's without reading it. A dump file whose stamp is
/// the one it had when its worker started is not that worker's dump: an earlier run's, or
/// another job's on the node (PyTorch's default path is /tmp/nccl_trace_rank_N, and a user may
/// point every run at one path).
struct FileStamp {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t bytes = 0;
  int64_t modified_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

/// One rank's flight-recorder dump: where PyTorch writes it and what was seen there.
struct FlightRecorderDump {
  int rank = 0;
  std::string path;
  std::optional<uint64_t> bytes;    ///< its size when last looked at; none: no file
  bool complete = false;            ///< its size held for the settle time
  std::optional<FileStamp> before;  ///< the file at `path` when its worker started, if any
};

/// How long a dump's size must hold before it counts as written.
inline constexpr std::chrono::milliseconds kDumpSettle{500};

class DumpWait {
 public:
  DumpWait(std::vector<FlightRecorderDump> asked, SteadyTime asked_at, SteadyDuration timeout,
           SteadyDuration settle = kDumpSettle);

  /// The size of dump `index`'s file seen at `now` (none: no file).
  void observe(size_t index, std::optional<uint64_t> bytes, SteadyTime now);
  /// Every dump is complete, or the deadline has come.
  bool finished(SteadyTime now) const;
  /// A pause (Ctrl-Z) of the whole node, ranks included: neither the deadline nor a dump's
  /// settling counts it.
  void postpone(SteadyDuration paused);
  SteadyTime deadline() const { return deadline_; }
  const std::vector<FlightRecorderDump>& dumps() const { return dumps_; }

 private:
  std::vector<FlightRecorderDump> dumps_;
  std::vector<SteadyTime> same_since_;  ///< since when each dump's size has been what it is
  SteadyTime deadline_;
  SteadyDuration settle_;
};

/// A dump wait in seconds as the dump lines say it: "10", "0.5".
std::string dump_wait_seconds(std::chrono::milliseconds duration);

/// The summary's line for one dump: "flight recorder dump of rank 1: PATH (N bytes)", or
/// "rank 1 wrote no dump within 10 s"; `kept` false adds that the file goes when the run ends.
std::string dump_line(const FlightRecorderDump& dump, std::chrono::milliseconds waited, bool kept);

}  // namespace cohort
