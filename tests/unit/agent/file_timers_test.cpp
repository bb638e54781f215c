// torchrun's FileTimer protocol, pure: parsing the JSON lines FileTimerClient writes, acquire and
// release per (pid, scope), and which workers are reaped with which signal, at a given time.
#include <catch2/catch.hpp>
#include <limits>

#include "agent/file_timers.hpp"

using namespace cohort;

namespace {

TimerRequest parse(const std::string& line) {
  std::string error;
  auto request = parse_timer_request(line, error);
  INFO(error);
  REQUIRE(request);
  return *request;
}

}  // namespace

TEST_CASE("FileTimer requests: torchrun 1.13's JSON lines", "[unit][agent][timer]") {
  TimerRequest acquire =
      parse(R"({"version": 1, "pid": 4321, "scope_id": "step", "expiration_time": 1700000001.5, )"
            R"("signal": 9})");
  CHECK(acquire.pid == 4321);
  CHECK(acquire.scope == "step");
  CHECK(acquire.expiration_time == 1700000001.5);
  CHECK(acquire.signal == 9);
  TimerRequest release = parse(
      R"({"version": 1, "pid": 4321, "scope_id": "step", "expiration_time": -1, "signal": 0})");
  CHECK(release.expiration_time < 0);

  std::string error;
  for (const char* bad : {"", "not json", "[1]", R"({"pid": "x", "scope_id": "a",
      "expiration_time": 1})",
                          R"({"pid": -5, "scope_id": "a", "expiration_time": 1})",
                          R"({"pid": 5, "expiration_time": 1})",
                          R"({"pid": 4294967297, "scope_id": "a", "expiration_time": 1})",
                          R"({"pid": 5, "scope_id": "a", "expiration_time": 1, "signal": 99})"}) {
    CHECK_FALSE(parse_timer_request(bad, error));
    CHECK_FALSE(error.empty());
  }
}

TEST_CASE("FileTimers: an expired scope reaps its pid once, a release disarms it",
          "[unit][agent][timer]") {
  FileTimers timers;
  timers.apply({100, "a", 10.0, 9});
  timers.apply({100, "b", 8.0, 15});
  timers.apply({200, "a", 12.0, 9});
  timers.apply({300, "quiet", 5.0, 0});  // no signal: never reaps
  CHECK(timers.next_expiration() == 8.0);
  CHECK(timers.take_expired(7.9).empty());

  std::vector<ExpiredTimer> expired = timers.take_expired(11.0);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].pid == 100);
  CHECK(expired[0].signal == 15);  // its first expired timer's signal
  CHECK(expired[0].scope == "b");
  CHECK(timers.next_expiration() == 12.0);  // pid 100's timers are gone with it

  timers.apply({200, "a", -1, 0});  // released before it ran out
  CHECK_FALSE(timers.next_expiration());
  CHECK(timers.take_expired(100.0).empty());

  timers.apply({400, "x", 1.0, 9});
  timers.clear();
  CHECK(timers.take_expired(100.0).empty());
}

TEST_CASE("FileTimers: acquiring a scope again moves its expiration", "[unit][agent][timer]") {
  FileTimers timers;
  timers.apply({100, "step", 10.0, 9});
  timers.apply({100, "step", 20.0, 9});
  CHECK(timers.take_expired(15.0).empty());
  CHECK(timers.take_expired(20.0).size() == 1);
}

TEST_CASE("FileTimers: a pause of the agent and its workers moves every expiration that much",
          "[unit][agent][timer]") {
  FileTimers timers;
  timers.apply({100, "step", 10.0, 9});
  timers.apply({200, "load", 12.5, 15});
  timers.postpone(30.0);
  CHECK(timers.next_expiration() == 40.0);
  CHECK(timers.take_expired(39.9).empty());
  std::vector<ExpiredTimer> expired = timers.take_expired(42.5);
  REQUIRE(expired.size() == 2);
  CHECK(expired[1].expiration_time == 42.5);
}

TEST_CASE("FileTimers: a flood of distinct scopes is refused past the cap",
          "[unit][agent][timer]") {
  FileTimers timers;
  for (size_t i = 0; i < FileTimers::kMaxTimers; ++i) {
    REQUIRE(timers.apply({100, "scope" + std::to_string(i), 50.0, 9}));
  }
  CHECK_FALSE(timers.apply({100, "one too many", 10.0, 9}));
  CHECK(timers.next_expiration() == 50.0);        // nothing of the refused one kept
  CHECK(timers.apply({100, "scope0", 60.0, 9}));  // a known scope still moves
  CHECK(timers.apply({100, "scope1", -1, 0}));    // and is released
  CHECK(timers.apply({100, "now there is room", 70.0, 9}));
}

TEST_CASE("FileTimers: the server's wait for a far or odd expiration stays within a day",
          "[unit][agent][timer]") {
  using std::chrono::milliseconds;
  const double now = 1.7e9;
  CHECK(timer_wait(1e12, now) == kMaxTimerWait);  // not a delay that overflows the clock
  CHECK(timer_wait(1e300, now) == kMaxTimerWait);
  CHECK(timer_wait(std::numeric_limits<double>::infinity(), now) == kMaxTimerWait);
  CHECK(timer_wait(now + 1.5, now) == milliseconds(1500));
  CHECK(timer_wait(now + 0.0001, now) == milliseconds(1));  // never early
  CHECK(timer_wait(now - 5, now) == milliseconds(0));
  CHECK(timer_wait(std::numeric_limits<double>::quiet_NaN(), now) == milliseconds(0));
}
