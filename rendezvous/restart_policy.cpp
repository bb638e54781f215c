#include "rendezvous/restart_policy.hpp"

#include <algorithm>

namespace cohort {

std::chrono::milliseconds restart_backoff(int restart_number) {
  constexpr std::chrono::milliseconds kFirst{10}, kMax{5000};
  std::chrono::milliseconds delay = kFirst;
  for (int i = 1; i < restart_number && delay < kMax; ++i) delay *= 4;
  return std::min(delay, kMax);
}

RestartDecision decide_restart(int restarts_done, int max_restarts) {
  if (restarts_done >= max_restarts) return {};
  return {true, restart_backoff(restarts_done + 1)};
}

}  // namespace cohort
