// The runs a daemon saw leave for another endpoint: the latest kept, bounded, forgotten when back.
#include "rendezvous/moved_runs.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace cohort::rdzv;

TEST_CASE("moved runs keep the latest endpoint, forget a run that came back, and stay bounded",
          "[unit][rendezvous]") {
  MovedRuns moved;
  moved.moved("a", "node2:1");
  moved.moved("a", "node3:1");  // moved on again: the latest says where
  REQUIRE(moved.runs().size() == 1);
  CHECK(moved.runs().at("a") == "node3:1");
  moved.forget("a");
  moved.forget("never-moved");
  CHECK(moved.runs().empty());
  for (size_t i = 0; i < kMaxMovedRuns + 10; ++i) moved.moved("run" + std::to_string(i), "h:1");
  CHECK(moved.runs().size() == kMaxMovedRuns);
  CHECK(moved.runs().count("run9") == 0);  // the oldest went first
  CHECK(moved.runs().count("run10") == 1);
  moved.moved("run10", "h:2");  // a move again is the newest: run11 goes next, not run10
  moved.moved("extra", "h:1");
  CHECK(moved.runs().count("run10") == 1);
  CHECK(moved.runs().count("run11") == 0);
}
