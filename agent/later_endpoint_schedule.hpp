// When an agent waiting for a round next asks each later --rdzv-fallback endpoint whether the run
// went on there (Agent::watch_endpoints). An endpoint whose host answered without the run in a
// round (its port refused, or its daemon has no round of the run) is asked again after 2, 4, 8...
// intervals, at most kMaxGapIntervals apart: spares, and every agent of a large job waiting for
// its first round, would otherwise each ask a standby daemon once an interval. One that stayed
// silent (a cut network, whose healing is what the question watches for) is asked at every turn.
// Each wait is spread over 0.75 to 1.25 times its gap, and each turn over 0.5 to 1.5 intervals, so
// that agents that joined together do not ask together, not even the first time. Pure (time and
// chance passed in); owned by the Agent, on its io thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>

#include "common/clock.hpp"

namespace cohort::agent {

class LaterEndpointSchedule {
 public:
  static constexpr int kMaxGapIntervals = 16;

  explicit LaterEndpointSchedule(std::chrono::milliseconds interval) : interval_(interval) {}

  /// The wait before the next turn: `spread` in [0, 1) places it between 0.5 (0) and 1.5 (1)
  /// intervals.
  std::chrono::milliseconds turn_wait(double spread) const;
  /// `endpoint` may be asked at `now`.
  bool due(size_t endpoint, SteadyTime now) const;
  /// Its host answered the question asked at `asked_at` without the run in a round there: asked
  /// again about 2 intervals after, then 4, 8... (at most kMaxGapIntervals) after each such
  /// answer; `spread` in [0, 1) places the wait between 0.75 (0) and 1.25 (1) times that gap.
  void answered_without_run(size_t endpoint, SteadyTime asked_at, double spread = 0.5);
  /// It stayed silent (no answer in time, no route): asked at every turn again.
  void silent(size_t endpoint) { waits_.erase(endpoint); }
  /// A round came, or the agent moved: every endpoint is asked at every turn again.
  void reset() { waits_.clear(); }

 private:
  struct Wait {
    std::chrono::milliseconds gap;  ///< from the last question to the next
    SteadyTime next;
  };
  std::chrono::milliseconds interval_;
  std::map<size_t, Wait> waits_;  ///< by endpoint; absent: due at every turn
};

}  // namespace cohort::agent
