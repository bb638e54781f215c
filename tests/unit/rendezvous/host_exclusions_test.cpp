#include "rendezvous/host_exclusions.hpp"

#include <catch2/catch.hpp>

using namespace cohort::rdzv;
using namespace std::chrono_literals;

TEST_CASE("a host is excluded at the failure limit, for a cooldown that doubles",
          "[unit][rendezvous][exclusion]") {
  HostExclusions hosts(2, 60s);
  TimePoint t0{};
  CHECK_FALSE(hosts.failed("node-b", t0).has_value());
  CHECK_FALSE(hosts.failed("node-c", t0 + 1s).has_value());  // counted per host
  CHECK_FALSE(hosts.excluded("node-b", t0 + 1s));

  std::optional<Exclusion> first = hosts.failed("node-b", t0 + 2s);
  REQUIRE(first.has_value());
  CHECK(first->host == "node-b");
  CHECK(first->failures == 2);
  CHECK(first->cooldown == 60s);
  CHECK(first->until == t0 + 62s);
  CHECK(hosts.excluded("node-b", t0 + 61s));
  CHECK_FALSE(hosts.excluded("node-c", t0 + 61s));
  CHECK(hosts.excluded_until("node-b") == t0 + 62s);
  CHECK_FALSE(hosts.excluded_until("node-c").has_value());
  CHECK_FALSE(hosts.excluded("node-b", t0 + 62s));

  // The count starts again: the next exclusion needs two more failures and lasts twice as long.
  CHECK_FALSE(hosts.failed("node-b", t0 + 100s).has_value());
  std::optional<Exclusion> second = hosts.failed("node-b", t0 + 110s);
  REQUIRE(second.has_value());
  CHECK(second->cooldown == 120s);
  hosts.failed("node-b", t0 + 300s);
  CHECK(hosts.failed("node-b", t0 + 301s)->cooldown == 240s);
}

TEST_CASE("the cooldown stops doubling at a day, and limit 0 never excludes",
          "[unit][rendezvous][exclusion]") {
  HostExclusions hosts(1, 1h);
  TimePoint now{};
  Ms last{0};
  for (int i = 0; i < 40; ++i) last = hosts.failed("node-b", now)->cooldown;
  CHECK(last == std::chrono::hours(24));

  HostExclusions never(0, 60s);
  for (int i = 0; i < 5; ++i) CHECK_FALSE(never.failed("node-b", now).has_value());
  CHECK_FALSE(never.excluded("node-b", now));
}

TEST_CASE("a host the run cannot spare is excluded at its next failure that it can",
          "[unit][rendezvous][exclusion]") {
  HostExclusions hosts(2, 60s);
  TimePoint now{};
  CHECK_FALSE(hosts.failed("node-b", now, /*can_spare=*/false).has_value());
  CHECK_FALSE(hosts.failed("node-b", now, false).has_value());
  CHECK_FALSE(hosts.excluded("node-b", now));
  std::optional<Exclusion> later = hosts.failed("node-b", now, true);
  REQUIRE(later.has_value());
  CHECK(later->failures == 3);
}
