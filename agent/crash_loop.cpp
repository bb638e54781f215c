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

std::string CrashLoopRule::judge(const WorkerFailure& root) {
  std::string cause = failure_cause(root);
  same_in_a_row_ = cause == last_cause_ ? same_in_a_row_ + 1 : 1;
  last_cause_ = cause;
  if (!root.status.signaled && settings_.final_exit_codes.count(root.status.code)) {
    return "exit code " + std::to_string(root.status.code) + " is final (--no-restart-exit-codes)";
  }
  if (settings_.max_same_failures > 0 && same_in_a_row_ >= settings_.max_same_failures) {
    return "a crash loop: the same failure " + std::to_string(same_in_a_row_) +
           " times in a row (" + cause + ")";
  }
  return {};
}

bool CrashLoopRule::startup_failure(const WorkerFailure& failure) const {
  return settings_.min_uptime.count() > 0 && failure.uptime < settings_.min_uptime;
}

}  // namespace cohort
