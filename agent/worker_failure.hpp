// What is known about one failed worker: who it was, how it ended, when, its error file and the
// last lines it wrote to stderr. Plain value type, filled by WorkerGroup, read by the summary.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/flight_recorder_dumps.hpp"
#include "common/exit_status.hpp"

namespace cohort {

/// Why a worker was stopped for making no progress, and what it showed when stopped.
struct HangReport {
  std::chrono::milliseconds silent_for{0};  ///< no signal for this long when declared hung
  std::optional<int64_t> step;              ///< the last step a heartbeat reported
  std::optional<std::chrono::system_clock::time_point> last_signal;  ///< none: never signalled
  std::string stacks_file;          ///< where its stacks (a Python traceback, eu-stack) were saved
  std::vector<std::string> frames;  ///< the innermost frames of the stuck thread
  std::string note;                 ///< when no stacks could be had: how to get them
  std::vector<FlightRecorderDump> dumps;   ///< the NCCL dumps asked for and waited on
  std::chrono::milliseconds dump_wait{0};  ///< --hang-dump-timeout, for "none within S s"
  bool dumps_kept = true;                  ///< false: removed when the run ends (no --log-dir)
};

struct WorkerFailure {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = 0;
  ExitStatus status;
  std::chrono::system_clock::time_point time;  ///< from the error file if it has one
  std::string error_file;                      ///< path given to the worker
  bool error_file_written = false;
  bool error_file_kept = true;  ///< false: it is removed when the run ends (no --log-dir)
  std::string error_message;    ///< "ExceptionType: text" from the error file
  std::string traceback;        ///< py_callstack from the error file
  std::vector<std::string> stderr_tail;
  std::optional<HangReport> hang;       ///< stopped by cohort for making no progress
  std::string timer_expired;            ///< stopped by cohort: a FileTimer scope it set ran out
  std::chrono::milliseconds uptime{0};  ///< from its start to its failure
  bool startup_failure = false;         ///< failed within --min-uptime of its start
  bool after_stop = false;  ///< exited with a code of its own after cohort asked it to stop
  /// Why its log files and error file may be cut short or missing (their filesystem was full
  /// when it failed); empty: no sign of that.
  std::string files_cut;
};

}  // namespace cohort
