// A worker's step time from its step heartbeats: the median of the last steps, robust to one
// slow step, and a step count that goes back starts over.
#include <catch2/catch.hpp>

#include "agent/step_times.hpp"

using namespace cohort;
using namespace std::chrono_literals;

TEST_CASE("step times: the median of the last steps' durations", "[unit][agent][straggler]") {
  StepTimes times;
  SteadyTime now{};
  CHECK_FALSE(times.median());
  times.beat(0, now);
  CHECK_FALSE(times.median());
  for (int64_t step = 1; step <= 5; ++step) {
    now += step == 3 ? 900ms : 100ms;  // one slow step does not move the median
    times.beat(step, now);
  }
  CHECK(times.median() == SteadyDuration(100ms));
  times.beat(5, now + 50ms);  // a repeat is no new step
  now += 400ms;
  times.beat(7, now);  // two steps in 400 ms: 200 ms each
  for (int i = 0; i < 9; ++i) {
    now += 200ms;
    times.beat(8 + i, now);
  }
  CHECK(times.median() == SteadyDuration(200ms));
  times.beat(0, now + 1s);  // a new count (a restart): measured from here
  times.beat(1, now + 1s + 300ms);
  CHECK(times.median() == SteadyDuration(200ms));
}
