// What is known about one failed worker: who it was, how it ended, when, its error file and the
// last lines it wrote to stderr. Plain value type, filled by WorkerGroup, read by the summary.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/exit_status.hpp"

namespace cohort {

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
};

}  // namespace cohort
