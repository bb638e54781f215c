// EventHistory: each run's newest events within its limits, ended runs kept within theirs, a
// run id used again starting afresh.
#include <catch2/catch.hpp>

#include "rendezvous/event_history.hpp"

using namespace cohort;

namespace {
EventHistory::Limits small_limits() {
  EventHistory::Limits limits;
  limits.events_per_run = 3;
  limits.bytes_per_run = 100;
  limits.ended_runs = 2;
  limits.ended_bytes = 60;
  return limits;
}
}  // namespace

TEST_CASE("a run keeps its newest events and counts the dropped ones",
          "[unit][rendezvous][events]") {
  EventHistory history(small_limits());
  history.run_created("r");
  for (std::string line : {"a\n", "b\n", "c\n", "d\n", "e\n"}) history.add("r", line);
  CHECK(history.lines("r") == std::deque<std::string>{"c\n", "d\n", "e\n"});
  CHECK(history.dropped("r") == 2);
  history.add("r", std::string(99, 'x'));  // over the byte limit: the older lines go
  CHECK(history.lines("r").size() == 1);
  CHECK(history.dropped("r") == 5);
  history.add("r", std::string(200, 'y'));  // one line over the limit alone is still kept
  CHECK(history.lines("r").size() == 1);
  CHECK(history.lines("nothing").empty());
  CHECK_FALSE(history.has_run("nothing"));
}

TEST_CASE("ended runs are kept within their count and bytes, the oldest to end going first",
          "[unit][rendezvous][events]") {
  EventHistory history(small_limits());
  for (std::string run : {"r1", "r2", "r3"}) {
    history.run_created(run);
    history.add(run, std::string(20, 'x'));
  }
  history.run_ended("r1");
  history.run_ended("r2");
  CHECK(history.has_run("r1"));
  CHECK(history.ended_runs() == std::vector<std::string>{"r2", "r1"});
  history.run_ended("r3");  // three ended runs: r1 goes
  CHECK_FALSE(history.has_run("r1"));
  CHECK(history.has_run("r2"));
  CHECK(history.has_run("r3"));
  history.add("r3", std::string(30, 'z'));  // 20 + 50 bytes ended: over 60, r2 goes
  CHECK_FALSE(history.has_run("r2"));
  CHECK(history.has_run("r3"));  // the newest ended run always stays
}

TEST_CASE("a run id used again starts with a fresh history", "[unit][rendezvous][events]") {
  EventHistory history(small_limits());
  history.run_created("r");
  history.add("r", "old\n");
  history.run_ended("r");
  history.run_created("r");
  CHECK(history.lines("r").empty());
  history.add("r", "new\n");
  CHECK(history.lines("r") == std::deque<std::string>{"new\n"});
}

TEST_CASE("the live runs together stay within their budget, the largest history giving first",
          "[unit][rendezvous][events]") {
  EventHistory::Limits limits = small_limits();
  limits.live_bytes = 150;  // 100 a run: two full runs would hold 200
  EventHistory history(limits);
  history.run_created("quiet");
  history.run_created("flood");
  for (int i = 0; i < 3; ++i) history.add("quiet", std::string(10, 'q'));
  for (int i = 0; i < 20; ++i) history.add("flood", std::string(30, 'f'));
  CHECK(history.lines("quiet").size() == 3);  // untouched: the flood gave up its own lines
  CHECK(history.lines("flood").size() == 3);
  history.add("quiet", std::string(60, 'q'));  // 30 + 60 + 90 = 180: the flood, largest, gives
  CHECK(history.lines("quiet").size() == 3);
  CHECK(history.lines("flood").size() == 2);
  uint64_t flood_dropped = history.dropped("flood");
  history.add("quiet", std::string(90, 'q'));  // quiet over its own 100: keeps its newest
  CHECK(history.lines("quiet").size() == 1);
  CHECK(history.dropped("flood") == flood_dropped);  // 90 + 60 = 150: within the budget
  history.run_ended("flood");  // an ended run's lines count against the ended runs' budget
  history.run_created("late");
  history.add("late", std::string(60, 'l'));
  CHECK(history.lines("late").size() == 1);
  CHECK(history.lines("quiet").size() == 1);
}
