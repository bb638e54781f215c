// A worker's step time from its step heartbeats: the median of the last steps, robust to one
// slow step, and a step count that goes back starts over.
#include <catch2/catch.hpp>

#include <limits>

#include "agent/heartbeat_channel.hpp"
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

TEST_CASE("step times: counts at the ends of int64 never make a negative step time",
          "[unit][agent][straggler]") {
  constexpr int64_t kLowest = std::numeric_limits<int64_t>::min();
  constexpr int64_t kHighest = std::numeric_limits<int64_t>::max();
  StepTimes times;
  SteadyTime now{};
  times.beat(kLowest, now);
  times.beat(kHighest, now + 5s);
  REQUIRE(times.median());
  CHECK(*times.median() >= SteadyDuration::zero());
  times.beat(-1, now + 6s);  // a new count, then the longest jump from it
  times.beat(kHighest, now + 7s);
  CHECK(*times.median() >= SteadyDuration::zero());
}

TEST_CASE("heartbeat lines: a negative step is a sign of life, not a step",
          "[unit][agent][straggler]") {
  HeartbeatLines lines;
  CHECK_FALSE(lines.feed("step -9223372036854775808\n"));
  CHECK_FALSE(lines.feed("step -1\n"));
  CHECK(lines.feed("step 9223372036854775807\n") == std::numeric_limits<int64_t>::max());
  CHECK(lines.feed("step 0\nstep -5\n") == 0);
}
