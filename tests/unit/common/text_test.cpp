#include "common/text.hpp"

#include <catch2/catch.hpp>
#include <limits>

using namespace cohort;
using std::chrono::milliseconds;

TEST_CASE("seconds become milliseconds only when a duration can hold them", "[unit][common]") {
  CHECK(parse_seconds("0") == milliseconds(0));
  CHECK(parse_seconds("1.5") == milliseconds(1500));
  CHECK(parse_seconds(" 30 ") == milliseconds(30000));
  CHECK(parse_seconds("31536000") == milliseconds(31536000000));  // a year
  for (const char* bad : {"31536001", "1e300", "inf", "-inf", "nan", "-1", "", "5s", "abc"}) {
    INFO(bad);
    CHECK_FALSE(parse_seconds(bad).has_value());
  }
  CHECK_FALSE(seconds_to_ms(std::numeric_limits<double>::quiet_NaN()).has_value());
  CHECK_FALSE(seconds_to_ms(std::numeric_limits<double>::infinity()).has_value());
  CHECK(seconds_to_ms(0.25) == milliseconds(250));
}
