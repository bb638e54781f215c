#include "agent/step_times.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace cohort {

void StepTimes::beat(int64_t step, SteadyTime now) {
  if (last_step_ && step > *last_step_) {
    // In unsigned arithmetic: from INT64_MIN to INT64_MAX the gap does not fit an int64_t.
    uint64_t gap = static_cast<uint64_t>(step) - static_cast<uint64_t>(*last_step_);
    auto divisor = static_cast<SteadyDuration::rep>(
        std::min<uint64_t>(gap, std::numeric_limits<SteadyDuration::rep>::max()));
    samples_.push_back((now - last_at_) / divisor);
    if (samples_.size() > kSamples) samples_.pop_front();
  }
  if (!last_step_ || step != *last_step_) {
    last_step_ = step;
    last_at_ = now;
  }
}

std::optional<SteadyDuration> StepTimes::median() const {
  if (samples_.empty()) return std::nullopt;
  std::vector<SteadyDuration> sorted(samples_.begin(), samples_.end());
  auto middle = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
  std::nth_element(sorted.begin(), middle, sorted.end());
  return *middle;
}

}  // namespace cohort
