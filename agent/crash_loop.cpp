#include "agent/crash_loop.hpp"

namespace cohort {

std::string failure_cause(const WorkerFailure& failure) {
  std::string cause = failure.status.describe();
  for (auto line = failure.stderr_tail.rbegin(); line != failure.stderr_tail.rend(); ++line) {
    if (line->find_first_not_of(" \t\r") == std::string::npos) continue;
    return cause + ": " + *line;
  }
  return cause;
}

// A Python worker whose interpreter has no torch fails the same way on every restart.
std::string CrashLoopRule::missing_torch(const WorkerFailure& root) const {
  if (settings_.python.empty()) return {};
  const std::string error = "No module named 'torch'";
  bool said = root.error_message.find(error) != std::string::npos;
  for (const std::string& line : root.stderr_tail)
    said = said || line.find(error) != std::string::npos;
  if (!said) return {};
  return "the workers' Python, " + settings_.python +
         ", has no torch (ModuleNotFoundError: No module named 'torch'), and no restart can change "
         "that: choose an interpreter that has it with PYTHON_EXEC (e.g. "
         "PYTHON_EXEC=/usr/bin/python3), or put its directory first on PATH";
}

std::string CrashLoopRule::judge(const WorkerFailure& root, bool restarts_left) {
  std::string cause = failure_cause(root);
  same_in_a_row_ = cause == last_cause_ ? same_in_a_row_ + 1 : 1;
  last_cause_ = cause;
  if (!root.status.signaled && settings_.final_exit_codes.count(root.status.code)) {
    return "exit code " + std::to_string(root.status.code) + " is final (--no-restart-exit-codes)";
  }
  if (std::string missing = missing_torch(root); !missing.empty()) return missing;
  if (restarts_left && settings_.max_same_failures > 0 &&
      same_in_a_row_ >= settings_.max_same_failures) {
    return "a crash loop: the same failure " + std::to_string(same_in_a_row_) +
           " times in a row (" + cause + ")";
  }
  return {};
}

void CrashLoopRule::failed_after_stop(const WorkerFailure& failure) {
  std::string cause = failure_cause(failure);
  if (same_in_a_row_ > 0 && cause != last_cause_) return;
  ++same_in_a_row_;
  last_cause_ = cause;
}

bool CrashLoopRule::startup_failure(const WorkerFailure& failure) const {
  return settings_.min_uptime.count() > 0 && failure.uptime < settings_.min_uptime;
}

}  // namespace cohort
