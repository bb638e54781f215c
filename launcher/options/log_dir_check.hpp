// Before `cohort run` joins the rendezvous: can it write its log files? Creates --log-dir (as
// the run would) and a probe file in it, then removes the probe, so that an unwritable directory
// is a usage error found at once rather than after the other nodes have waited for this one.
// Touches the file system; main thread, at start.
#pragma once

#include <string>

namespace cohort {

/// Checks that `log_dir` (created if missing) and, if it already exists, `log_dir`/`run_dir_name`
/// take new files. "/dev/null" (files off) and "" (a temporary directory made by the run) pass.
/// Returns the problem, starting with "--log-dir", or an empty string.
std::string log_dir_problem(const std::string& log_dir, const std::string& run_dir_name);

}  // namespace cohort
