// Before `cohort run` joins the rendezvous: can it write its log files? Creates --log-dir (as
// the run would) and a probe file in it, then removes the probe, so that an unwritable directory
// is a usage error found at once rather than after the other nodes have waited for this one.
// Touches the file system; main thread, at start.
#pragma once

#include <string>

namespace cohort {

/// Checks that `log_dir` (created if missing) takes new files: the agent makes its own
/// <run-id>_<random> directory there. "/dev/null" (files off) and "" (a temporary directory made
/// by the run) pass. Returns the problem, starting with "--log-dir", or an empty string.
std::string log_dir_problem(const std::string& log_dir);

}  // namespace cohort
