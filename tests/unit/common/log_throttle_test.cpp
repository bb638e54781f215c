// LogThrottle: one line per interval, and a count of the lines left out in between.
#include <catch2/catch.hpp>

#include "common/log_throttle.hpp"

using namespace cohort;
using namespace std::chrono_literals;

TEST_CASE("a throttled log allows one line per interval and counts the rest", "[unit][common]") {
  LogThrottle throttle(1000ms);
  auto start = std::chrono::steady_clock::time_point(1h);
  CHECK(throttle.due(start));
  CHECK(throttle.suppressed() == 0);
  CHECK_FALSE(throttle.due(start + 10ms));
  CHECK_FALSE(throttle.due(start + 999ms));
  CHECK(throttle.due(start + 1000ms));
  CHECK(throttle.suppressed() == 2);
  CHECK(throttle.due(start + 5000ms));
  CHECK(throttle.suppressed() == 0);
}
