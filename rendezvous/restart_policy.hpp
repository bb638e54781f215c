// Pure restart policy: whether a failed group starts again and after how long. The budget is
// `max_restarts` failure restarts; the delay grows 10 ms, 40 ms, 160 ms, ... up to 5 s, so a
// crash loop does not spin while a single failure costs almost nothing. Any thread.
#pragma once

#include <chrono>

namespace cohort {

struct RestartDecision {
  bool restart = false;
  std::chrono::milliseconds delay{0};
};

/// `restarts_done` failure restarts have already happened.
RestartDecision decide_restart(int restarts_done, int max_restarts);

/// Delay before failure restart number `restart_number` (1 for the first).
std::chrono::milliseconds restart_backoff(int restart_number);

}  // namespace cohort
