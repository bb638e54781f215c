#include <catch2/catch.hpp>

#include "common/log.hpp"
#include "tests/support/env_guard.hpp"

using namespace cohort;
using log::Level;

TEST_CASE("LOGLEVEL takes Python's level names in any case, and its numbers", "[unit][log]") {
  CHECK(log::parse_level("DEBUG") == Level::Debug);
  CHECK(log::parse_level("debug") == Level::Debug);
  CHECK(log::parse_level("Info") == Level::Info);
  CHECK(log::parse_level("WARN") == Level::Warn);
  CHECK(log::parse_level("warning") == Level::Warn);
  CHECK(log::parse_level("CRITICAL") == Level::Error);
  CHECK(log::parse_level("fatal") == Level::Error);
  CHECK(log::parse_level("0") == Level::Debug);
  CHECK(log::parse_level("10") == Level::Debug);
  CHECK(log::parse_level("20") == Level::Info);
  CHECK(log::parse_level("25") == Level::Warn);
  CHECK(log::parse_level("40") == Level::Error);
  for (const char* bad : {"", "bogus", "-10", "1000", "2O", "INFO "}) {
    INFO(bad);
    CHECK_FALSE(log::parse_level(bad));
  }
}

TEST_CASE("a LOGLEVEL that names no level is said and ignored: an empty one is unset",
          "[unit][log]") {
  test::EnvGuard env;
  env.set("LOGLEVEL", "verbose\x1b[2J");
  CHECK(log::level_from_env(Level::Warn) == Level::Warn);
  CHECK(log::level_env_problem() ==
        "LOGLEVEL=verbose\\x1b[2J: expected DEBUG, INFO, WARNING, ERROR or CRITICAL (or a number "
        "such as 20); it is ignored");
  env.set("LOGLEVEL", "");
  CHECK(log::level_from_env(Level::Info) == Level::Info);
  CHECK(log::level_env_problem().empty());
  env.set("LOGLEVEL", "error");
  CHECK(log::level_from_env(Level::Warn) == Level::Error);
  CHECK(log::level_env_problem().empty());
  env.unset("LOGLEVEL");
  CHECK(log::level_env_problem().empty());
}
