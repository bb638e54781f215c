// One worker's step time, from its "step N" heartbeats: the duration of each step it reported
// (the time between two heartbeats divided by the steps between them) and the median of the
// last few, which the agent reports to the daemon for straggler detection. Pure: time is passed
// in. Owned by WorkerGroup, one per worker; io thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "common/clock.hpp"

namespace cohort {

class StepTimes {
 public:
  /// How many of the last steps the median is taken over.
  static constexpr size_t kSamples = 9;

  /// A heartbeat reported `step` at `now`. A step that does not move forward (a restart of the
  /// count, a repeat) starts the measurement again. Any two counts give a duration >= 0.
  void beat(int64_t step, SteadyTime now);
  /// The median duration of the last kSamples steps; nullopt before two steps were reported.
  std::optional<SteadyDuration> median() const;

 private:
  std::optional<int64_t> last_step_;
  SteadyTime last_at_{};
  std::deque<SteadyDuration> samples_;
};

}  // namespace cohort
