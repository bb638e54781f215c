// Reads the error file a worker may write (torchelastic's @record format: {"message": {"message":
// ..., "extraInfo": {"py_callstack": ..., "timestamp": ...}}}) and writes the agent's own copy of
// the root cause with "errorCode" in its message, as torchrun does. Pure file I/O; any thread.
#pragma once

#include <optional>
#include <string>

#include "agent/worker_failure.hpp"

namespace cohort {

/// Fills error_message, traceback and time of `failure` from its error file, if one was written.
void load_error_file(WorkerFailure& failure);

/// Writes the root cause to `path` in torchrun's format: the worker's error file (or, where it
/// wrote none, one made from its exit status) with message.errorCode set to the worker's exit
/// code, or minus the signal that ended it. Returns false when the file cannot be written.
bool write_root_cause_file(const std::string& path, const WorkerFailure& root_cause);

}  // namespace cohort
