#include "process/agent_silence.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>

using namespace cohort;
using namespace std::chrono_literals;

namespace {

ProcessVitals vitals(char state, uint64_t run_ms, uint64_t wait_ms) {
  return {state, run_ms * 1000000, wait_ms * 1000000};
}

}  // namespace

TEST_CASE("an agent silent for less than the stale limit is waited for", "[unit][process]") {
  CHECK(silence_verdict(vitals('S', 0, 0), vitals('T', 0, 0), 2999ms, 3s) == "");
}

TEST_CASE("a stopped, gone or deadlocked agent is dead to its workers at the stale limit",
          "[unit][process]") {
  ProcessVitals then = vitals('S', 100, 10);
  CHECK(silence_verdict(then, vitals('T', 100, 10), 3s, 3s) == "stopped");
  CHECK(silence_verdict(then, vitals('t', 100, 10), 3s, 3s) == "stopped");
  CHECK(silence_verdict(then, std::nullopt, 3s, 3s) == "the agent is gone");
  // Asleep, neither running nor waiting to: nothing will wake it (a deadlock).
  CHECK(silence_verdict(then, vitals('S', 100, 10), 3s, 3s) == "hung");
  CHECK(silence_verdict(then, vitals('D', 100, 10), 3s, 3s) == "hung");
}

TEST_CASE("a starved agent is given up to four stale limits", "[unit][process]") {
  ProcessVitals then = vitals('S', 100, 10);
  // Runnable: waiting for a CPU on an overloaded machine.
  CHECK(silence_verdict(then, vitals('R', 101, 3000), 5441ms, 3s) == "");
  // Asleep again, but it spent a tenth of its silence on the run queue: starved, not hung.
  CHECK(silence_verdict(then, vitals('S', 102, 610), 6s, 3s) == "");
  CHECK(silence_verdict(then, vitals('S', 102, 590), 6s, 3s) == "hung");
  CHECK(silence_verdict(then, vitals('R', 200, 9000), 12s, 3s) ==
        "starved of CPU for 4 times the stale limit");
}

TEST_CASE("schedstat lines are read, malformed ones refused", "[unit][process]") {
  ProcessVitals read;
  REQUIRE(parse_schedstat("10059526 32851727 4\n", read));
  CHECK(read.run_ns == 10059526);
  CHECK(read.runqueue_wait_ns == 32851727);
  CHECK_FALSE(parse_schedstat("", read));
  CHECK_FALSE(parse_schedstat("12 x 3", read));
  std::optional<ProcessVitals> self = read_process_vitals(::getpid());
  REQUIRE(self);
  CHECK(self->state == 'R');
  CHECK(self->run_ns > 0);
}
