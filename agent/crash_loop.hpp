// The crash-loop rule, pure: which failures of this node's workers are not worth a restart. The
// same root cause (exit status and last stderr line) `max_same_failures` times in a row is a
// crash loop; an exit code the user listed as final (--no-restart-exit-codes) is final at once.
// A worker that failed within `min_uptime` of its start is a start-up failure (said in the
// summary). A Python worker that cannot import torch is final too: its interpreter lacks it. Owned
// by AgentState; io thread.
#pragma once

#include <chrono>
#include <set>
#include <string>

#include "agent/worker_failure.hpp"

namespace cohort {

struct CrashLoopSettings {
  int max_same_failures = 3;                ///< 0: off
  std::set<int> final_exit_codes;           ///< exit codes never restarted
  std::chrono::milliseconds min_uptime{0};  ///< 0: off
  std::string python;                       ///< the workers' interpreter; empty for --no-python
};

/// What a failure is, for telling two apart: "exit code 1: RuntimeError: boom".
std::string failure_cause(const WorkerFailure& failure);

class CrashLoopRule {
 public:
  explicit CrashLoopRule(CrashLoopSettings settings) : settings_(std::move(settings)) {}

  /// The root cause of one failed round of this node: why the run must end now instead of
  /// restarting, or an empty string. `restarts_left`: false when the run ends anyway (its
  /// restarts are used up), where a crash loop is no reason of its own.
  std::string judge(const WorkerFailure& root, bool restarts_left = true);
  /// A failure after a stop, which may be the stop's doing: it starts a streak where there is none
  /// and lengthens the same one, but never breaks another.
  void failed_after_stop(const WorkerFailure& failure);
  /// This node's workers succeeded: the streak ends.
  void succeeded() { same_in_a_row_ = 0; }
  /// Failed within --min-uptime of its start.
  bool startup_failure(const WorkerFailure& failure) const;
  const CrashLoopSettings& settings() const { return settings_; }

 private:
  std::string missing_torch(const WorkerFailure& root) const;

  CrashLoopSettings settings_;
  std::string last_cause_;
  int same_in_a_row_ = 0;
};

}  // namespace cohort
