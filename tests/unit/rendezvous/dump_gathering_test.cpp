// DumpGathering, pure: a round's members asked for their flight-recorder dumps after a hang,
// their reports (ranks outside a member's own dropped), the failure report held until every
// member answered or the deadline, the verdict with the culprit's node, and the verdict kept
// for the round's later failure reports.
#include "rendezvous/dump_gathering.hpp"

#include <catch2/catch.hpp>
#include <memory>

using namespace cohort;
using namespace cohort::rdzv;

namespace {

// Rank `rank` in the default group: completed `completed`, enqueued `enqueued`.
proto::RankCollectivesReport rank_at(int rank, int64_t completed, int64_t enqueued) {
  proto::RankCollectivesReport report;
  report.rank = rank;
  proto::GroupProgress group;
  group.id = "0";
  group.desc = "default_pg";
  group.last_completed = completed;
  group.last_enqueued = enqueued;
  if (enqueued > completed) {
    group.first_incomplete =
        proto::CollectiveCall{enqueued, "all_reduce", {{8}}, {"Float"}, "scheduled"};
  }
  group.last_call = proto::CollectiveCall{
      enqueued, "all_reduce", {{8}}, {"Float"}, enqueued > completed ? "scheduled" : "completed"};
  report.collectives.groups = {group};
  return report;
}

// Node "a" runs ranks 0-1, node "b" ranks 2-3.
std::map<std::string, MemberRanks> two_nodes() {
  return {{"a", {0, 2, "10.0.0.1"}}, {"b", {2, 2, "10.0.0.2"}}};
}

FailureReport hang_failure(int round) {
  FailureReport report;
  report.round = round;
  report.rank = 3;
  return report;
}

}  // namespace

TEST_CASE("dump gathering: every member's dumps in, the culprit's node named",
          "[unit][rendezvous][hang]") {
  DumpGathering gathering;
  TimePoint now{};
  gathering.start(4, two_nodes(), now + std::chrono::seconds(10));
  REQUIRE(gathering.active());
  gathering.hold("b", hang_failure(4));
  gathering.hold("a", hang_failure(4));  // only the first is held
  gathering.reported("b", {4, "node-b", {rank_at(2, 119, 120), rank_at(3, 119, 120)}});
  CHECK_FALSE(gathering.complete());
  proto::RankCollectivesReport gone;
  gone.rank = 2;
  gone.error = "no dump on disk";
  gathering.reported("b", {4, "node-b", {gone}});  // a second report takes no dump away
  // Node a also claims rank 3, which is b's: dropped.
  gathering.reported("a",
                     {4, "node-a", {rank_at(0, 119, 120), rank_at(1, 119, 119), rank_at(3, 1, 1)}});
  CHECK(gathering.complete());
  HangVerdict verdict = gathering.finish();
  CHECK_FALSE(gathering.active());
  CHECK(verdict.attributed);
  CHECK(verdict.had_dumps);
  CHECK(verdict.culprit_nodes == std::vector<std::string>{"a"});
  CHECK(verdict.text.find("all_reduce #120 on default_pg (4 ranks): 3 ranks enqueued it and "
                          "wait; rank 1 (node-a) never did") == 0);
  auto held = gathering.take_held();
  REQUIRE(held);
  CHECK(held->first == "b");
  // Kept for the round's later reports; a second hang in it asks nobody again.
  REQUIRE(gathering.verdict(4));
  CHECK(gathering.verdict(4)->text == verdict.text);
  CHECK_FALSE(gathering.verdict(5));
  gathering.start(4, two_nodes(), now);
  CHECK_FALSE(gathering.active());
  gathering.reset();
  CHECK_FALSE(gathering.verdict(4));
}

TEST_CASE("dump gathering: at the deadline the silent node's ranks have no dump",
          "[unit][rendezvous][hang]") {
  DumpGathering gathering;
  gathering.start(1, two_nodes(), TimePoint{} + std::chrono::seconds(3));
  gathering.reported("a", {1, "node-a", {rank_at(0, 9, 10), rank_at(1, 9, 10)}});
  gathering.reported("c", {1, "node-c", {rank_at(2, 9, 9)}});  // not a member: ignored
  gathering.reported("b", {0, "node-b", {rank_at(2, 9, 9)}});  // another round: ignored
  CHECK_FALSE(gathering.complete());
  HangVerdict verdict = gathering.finish();
  CHECK(verdict.attribution.without_dump == std::vector<int>{2, 3});
  CHECK_FALSE(verdict.attributed);  // the silent ranks may be the cause: no verdict on them
  CHECK(verdict.culprit_nodes.empty());
}

TEST_CASE("dump gathering: a node's later report brings the dumps its first lacked",
          "[unit][rendezvous][hang]") {
  DumpGathering gathering;
  gathering.start(0, two_nodes(), TimePoint{});
  proto::RankCollectivesReport none;
  none.rank = 0;
  none.error = "no flight-recorder pipe";
  proto::RankCollectivesReport also_none = none;
  also_none.rank = 1;
  gathering.reported("a", {0, "node-a", {none, also_none}});
  gathering.reported("b", {0, "node-b", {rank_at(2, 9, 10), rank_at(3, 9, 10)}});
  REQUIRE(gathering.complete());
  gathering.reported("a", {0, "node-a", {rank_at(0, 9, 10), rank_at(1, 9, 9)}});
  HangVerdict verdict = gathering.finish();
  CHECK(verdict.attribution.without_dump.empty());
  CHECK(verdict.culprit_nodes == std::vector<std::string>{"a"});
}

TEST_CASE("dump gathering: no dump at all says so", "[unit][rendezvous][hang]") {
  DumpGathering gathering;
  gathering.start(2, two_nodes(), TimePoint{});
  proto::RankCollectivesReport none;
  none.rank = 0;
  none.error = "no flight-recorder pipe";
  gathering.reported("a", {2, "node-a", {none}});
  HangVerdict verdict = gathering.finish();
  CHECK_FALSE(verdict.had_dumps);
  CHECK_FALSE(verdict.attributed);
  CHECK(verdict.text.find("no flight-recorder dumps") == 0);
  CHECK_FALSE(gathering.take_held());
}

TEST_CASE("dump gathering: no dump at all gives each reason with its ranks",
          "[unit][rendezvous][hang]") {
  DumpGathering gathering;
  gathering.start(2, two_nodes(), TimePoint{});
  auto without = [](int rank, const std::string& error) {
    proto::RankCollectivesReport report;
    report.rank = rank;
    report.error = error;
    return report;
  };
  gathering.reported("a", {2,
                           "node-a",
                           {without(0, "dump of 70000000 bytes, over the limit"),
                            without(1, "not a flight-recorder dump: not a pickle")}});
  gathering.reported("b", {2,
                           "node-b",
                           {without(2, "dump of 70000000 bytes, over the limit"),
                            without(3, "dump of 70000000 bytes, over the limit")}});
  HangVerdict verdict = gathering.finish();
  CHECK_FALSE(verdict.had_dumps);
  CHECK(verdict.text ==
        "no flight-recorder dumps; ranks 0,2-3: dump of 70000000 bytes, over the limit; rank 1: "
        "not a flight-recorder dump: not a pickle");
}

TEST_CASE(
    "dump gathering: past its budget a rank's dump counts as missing, and the verdict keeps "
    "none of them",
    "[unit][rendezvous][hang]") {
  DumpGathering probe;  // what a rank's dump of rank_at(r, 9, 10) costs: half of two
  probe.start(3, two_nodes(), TimePoint{});
  probe.reported("a", {3, "node-a", {rank_at(0, 9, 10), rank_at(1, 9, 10)}});
  const size_t one = probe.dump_bytes() / 2;
  REQUIRE(one > 0);
  DumpGathering gathering(3 * one);  // ranks 0 to 2 fit; rank 3's does not
  gathering.start(3, two_nodes(), TimePoint{});
  gathering.reported("a", {3, "node-a", {rank_at(0, 9, 10), rank_at(1, 9, 10)}});
  gathering.reported("b", {3, "node-b", {rank_at(2, 9, 10), rank_at(3, 9, 9)}});
  CHECK(gathering.dump_bytes() == 3 * one);
  HangVerdict verdict = gathering.finish();
  CHECK(verdict.attribution.without_dump == std::vector<int>{3});
  CHECK(verdict.text.find("no dump from rank 3 (node-b)") != std::string::npos);
  CHECK(gathering.dump_bytes() == 0);  // the verdict is what stays
  // Under the default budget all four are kept, and rank 3 is named.
  probe.reported("b", {3, "node-b", {rank_at(2, 9, 10), rank_at(3, 9, 9)}});
  HangVerdict full = probe.finish();
  CHECK(full.attribution.without_dump.empty());
  CHECK(full.culprit_nodes == std::vector<std::string>{"b"});
}

TEST_CASE(
    "dump gathering: runs' gatherings share the daemon's budget, and give it back at the "
    "verdict or when gone",
    "[unit][rendezvous][hang]") {
  DumpGathering probe;  // what one rank's dump costs
  probe.start(3, two_nodes(), TimePoint{});
  probe.reported("a", {3, "node-a", {rank_at(0, 9, 10), rank_at(1, 9, 10)}});
  const size_t one = probe.dump_bytes() / 2;
  auto all = std::make_shared<ByteBudget>(3 * one);  // three ranks' dumps, all runs together
  DumpGathering first(kMaxGatheredDumpBytes, all);
  auto second = std::make_unique<DumpGathering>(kMaxGatheredDumpBytes, all);
  first.start(3, two_nodes(), TimePoint{});
  second->start(3, two_nodes(), TimePoint{});
  first.reported("a", {3, "node-a", {rank_at(0, 9, 10), rank_at(1, 9, 10)}});
  second->reported("a", {3, "node-a", {rank_at(0, 9, 10), rank_at(1, 9, 10)}});
  CHECK(all->used() == 3 * one);  // the second run's rank 1 did not fit
  CHECK(second->dump_bytes() == one);
  second->reported("b", {3, "node-b", {rank_at(2, 9, 10), rank_at(3, 9, 9)}});
  HangVerdict verdict = second->finish();
  CHECK(verdict.attribution.without_dump == std::vector<int>{1, 2, 3});
  INFO(verdict.text);
  CHECK(verdict.text.find("no dump from ranks 1-3") != std::string::npos);
  CHECK(all->used() == 2 * one);  // the verdict is in: its dumps went back
  first.reported("b", {3, "node-b", {rank_at(2, 9, 10), rank_at(3, 9, 9)}});
  CHECK(all->used() == 3 * one);  // rank 2's fits now; rank 3's does not
  second.reset();
  first.reset();
  CHECK(all->used() == 0);
  DumpGathering{kMaxGatheredDumpBytes, all}.start(3, two_nodes(), TimePoint{});
  {
    DumpGathering gone(kMaxGatheredDumpBytes, all);  // a run forgotten mid-gathering
    gone.start(3, two_nodes(), TimePoint{});
    gone.reported("a", {3, "node-a", {rank_at(0, 9, 10)}});
    CHECK(all->used() == one);
  }
  CHECK(all->used() == 0);
}
