#include "agent/later_endpoint_schedule.hpp"

#include <algorithm>

namespace cohort::agent {

std::chrono::milliseconds LaterEndpointSchedule::turn_wait(double spread) const {
  double factor = 0.5 + std::clamp(spread, 0.0, 1.0);
  return std::chrono::duration_cast<std::chrono::milliseconds>(interval_ * factor);
}

bool LaterEndpointSchedule::due(size_t endpoint, SteadyTime now) const {
  auto wait = waits_.find(endpoint);
  return wait == waits_.end() || now >= wait->second.next;
}

void LaterEndpointSchedule::answered_without_run(size_t endpoint, SteadyTime asked_at,
                                                 double spread) {
  auto wait = waits_.try_emplace(endpoint, Wait{interval_, asked_at}).first;
  wait->second.gap = std::min(wait->second.gap * 2, interval_ * kMaxGapIntervals);
  double factor = 0.75 + std::clamp(spread, 0.0, 1.0) / 2;
  wait->second.next =
      asked_at + std::chrono::duration_cast<std::chrono::milliseconds>(wait->second.gap * factor);
}

}  // namespace cohort::agent
