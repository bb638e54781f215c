// When a waiting agent asks the later --rdzv-fallback endpoints again: at every turn until one
// answers without the run, then 2, 4, 8, 16 intervals apart; silence and a reset bring it back to
// every turn; each wait spread over 0.75 to 1.25 times its gap, each turn over 0.5 to 1.5
// intervals.
#include <catch2/catch.hpp>

#include "agent/later_endpoint_schedule.hpp"

using namespace cohort;
using namespace std::chrono_literals;

TEST_CASE("an endpoint that answers without the run is asked less and less often",
          "[unit][agent][fallback]") {
  agent::LaterEndpointSchedule schedule(1s);
  SteadyTime t0{};
  CHECK(schedule.due(1, t0));
  CHECK(schedule.due(2, t0));
  // Asked at t0 and answered: asked again 2 s after the question, not before.
  schedule.answered_without_run(1, t0);
  CHECK_FALSE(schedule.due(1, t0 + 1999ms));
  CHECK(schedule.due(1, t0 + 2s));
  CHECK(schedule.due(2, t0 + 1s));  // another endpoint keeps its own turn
  // Then 4, 8, 16, and never more than 16 intervals apart.
  SteadyTime asked = t0 + 2s;
  for (auto gap : {4s, 8s, 16s, 16s, 16s}) {
    schedule.answered_without_run(1, asked);
    CHECK_FALSE(schedule.due(1, asked + gap - 1ms));
    CHECK(schedule.due(1, asked + gap));
    asked += gap;
  }
}

TEST_CASE("silence, or a round or a move, brings an endpoint back to every turn",
          "[unit][agent][fallback]") {
  agent::LaterEndpointSchedule schedule(500ms);
  SteadyTime t0{};
  schedule.answered_without_run(1, t0);
  schedule.answered_without_run(1, t0 + 1s);
  schedule.answered_without_run(2, t0 + 1s);
  CHECK_FALSE(schedule.due(1, t0 + 2s));
  SECTION("silence: a cut network, whose healing the question watches for") {
    schedule.silent(1);
    CHECK(schedule.due(1, t0 + 1s));
    CHECK_FALSE(schedule.due(2, t0 + 1500ms));  // the other keeps its wait
    // The next answer starts from 2 intervals again.
    schedule.answered_without_run(1, t0 + 2s);
    CHECK(schedule.due(1, t0 + 3s));
  }
  SECTION("a reset") {
    schedule.reset();
    CHECK(schedule.due(1, t0 + 1s));
    CHECK(schedule.due(2, t0 + 1s));
  }
}

TEST_CASE("each wait is spread over 0.75 to 1.25 times its gap", "[unit][agent][fallback]") {
  agent::LaterEndpointSchedule schedule(1s);
  SteadyTime t0{};
  schedule.answered_without_run(1, t0, 0.0);  // gap 2 s: 1.5 s
  CHECK_FALSE(schedule.due(1, t0 + 1499ms));
  CHECK(schedule.due(1, t0 + 1500ms));
  schedule.answered_without_run(1, t0, 0.75);  // gap 4 s: 4.5 s
  CHECK_FALSE(schedule.due(1, t0 + 4499ms));
  CHECK(schedule.due(1, t0 + 4500ms));
  schedule.answered_without_run(1, t0, 7.0);  // out of range: as 1, gap 8 s: 10 s
  CHECK_FALSE(schedule.due(1, t0 + 9999ms));
  CHECK(schedule.due(1, t0 + 10s));
}

TEST_CASE("each turn is spread over 0.5 to 1.5 intervals, one interval on average",
          "[unit][agent][fallback]") {
  agent::LaterEndpointSchedule schedule(1s);
  CHECK(schedule.turn_wait(0.0) == 500ms);
  CHECK(schedule.turn_wait(0.5) == 1s);
  CHECK(schedule.turn_wait(0.25) == 750ms);
  CHECK(schedule.turn_wait(-1.0) == 500ms);  // out of range: clamped
  CHECK(schedule.turn_wait(7.0) == 1500ms);
}
