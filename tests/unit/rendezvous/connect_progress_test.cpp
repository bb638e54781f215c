// ConnectProgress: when the agent says that it cannot reach the rendezvous, and with what.
#include <catch2/catch.hpp>

#include "rendezvous/connect_progress.hpp"

using namespace cohort;
using namespace std::chrono_literals;

namespace {

const SteadyTime kStart{};
const SteadyTime kGiveUp = kStart + 600s;

}  // namespace

TEST_CASE("a name that does not resolve is said at once, with the time left",
          "[unit][rendezvous][connect]") {
  ConnectProgress progress("head:29400", kStart, kGiveUp);
  auto line = progress.attempt_failed(kStart + 30ms, "Host not found", true);
  REQUIRE(line);
  CHECK(*line ==
        "cannot reach the rendezvous at head:29400 (Host not found); trying again, giving up in "
        "10m00s (join_timeout)");
}

TEST_CASE("a refused connection is said only once the failures have lasted a second",
          "[unit][rendezvous][connect]") {
  ConnectProgress progress("head:29400", kStart, kGiveUp);
  CHECK_FALSE(progress.attempt_failed(kStart + 20ms, "Connection refused", false));
  CHECK_FALSE(progress.attempt_failed(kStart + 999ms, "Connection refused", false));
  CHECK(progress.attempt_failed(kStart + 1s, "Connection refused", false));
}

TEST_CASE("after the first line, one every ten seconds with the time left",
          "[unit][rendezvous][connect]") {
  ConnectProgress progress("head:29400", kStart, kGiveUp);
  REQUIRE(progress.attempt_failed(kStart, "Host not found", true));
  CHECK_FALSE(progress.attempt_failed(kStart + 5s, "Host not found", true));
  CHECK_FALSE(progress.attempt_failed(kStart + 9999ms, "Host not found", true));
  auto line = progress.attempt_failed(kStart + 10s, "Host not found", true);
  REQUIRE(line);
  CHECK(*line == "still trying head:29400 (Host not found), giving up in 9m50s");
  CHECK_FALSE(progress.attempt_failed(kStart + 19s, "Host not found", true));
  CHECK(progress.attempt_failed(kStart + 20s, "Host not found", true));
}
