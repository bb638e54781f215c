// The words of a hang: the one line that says which worker made no progress for how long and
// what its last signal was, and the innermost frames of the thread that was stuck, read from
// the traceback Python's faulthandler prints on SIGABRT. Pure; any thread.
#pragma once

#include <string>
#include <vector>

#include "agent/worker_failure.hpp"

namespace cohort {

/// "rank R (local rank L, pid P) made no progress for S s (last signal: step N at T)".
std::string hang_line(const WorkerFailure& failure, const HangReport& hang);

/// The first `count` frames ("File ..., line N in function") of the first thread in a
/// faulthandler dump (the current thread, else the first listed): where it was stuck.
std::vector<std::string> innermost_frames(const std::string& traceback, size_t count = 3);

}  // namespace cohort
