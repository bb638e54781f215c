#include "agent/later_endpoint_schedule.hpp"

#include <algorithm>

namespace cohort::agent {

bool LaterEndpointSchedule::due(size_t endpoint, SteadyTime now) const {
  auto wait = waits_.find(endpoint);
  return wait == waits_.end() || now >= wait->second.next;
}

void LaterEndpointSchedule::answered_without_run(size_t endpoint, SteadyTime asked_at) {
  auto wait = waits_.try_emplace(endpoint, Wait{interval_, asked_at}).first;
  wait->second.gap = std::min(wait->second.gap * 2, interval_ * kMaxGapIntervals);
  wait->second.next = asked_at + wait->second.gap;
}

}  // namespace cohort::agent
