// collective_report: a node's ranks' dump files after a wait, read and reduced into the
// `collectives` message: the real PyTorch 2.11 dump, a rank with no pipe, a dump not written in
// time, a file that is no pickle; and the groups a rank sends (incomplete first, capped).
#include "agent/collective_report.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>

#include "tests/support/temp_dir.hpp"
#include "tests/support/test_paths.hpp"

using namespace cohort;
using namespace std::chrono_literals;

TEST_CASE("a node's dumps reduced for the daemon: read, missing, late and corrupt",
          "[unit][agent][hang]") {
  test::TempDir dir;
  std::string fixture = std::string(test::kSourceDir) +
                        "/tests/data/flight_recorder/"
                        "torch-2.11-one-rank-queued-allreduce.pkl";
  std::ofstream(dir.file("garbage"), std::ios::binary) << "not a pickle at all";
  std::ifstream whole(fixture, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(whole)), {});
  std::ofstream(dir.file("half"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  // Rank 4: the real dump; 5: made no pipe; 6: asked, not written in time; 7: written, not a
  // dump; 8: cut short while it was written; 9: cut short, but whole.
  std::vector<FlightRecorderDump> dumps{{4, fixture, 3433, true},
                                        {6, dir.file("late"), std::nullopt, false},
                                        {7, dir.file("garbage"), 19, true},
                                        {8, dir.file("half"), 1716, false},
                                        {9, fixture, 3433, false}};
  proto::Collectives report = collective_report(2, "node-b", 4, 6, dumps, 8000ms);
  CHECK(report.round == 2);
  CHECK(report.host == "node-b");
  REQUIRE(report.ranks.size() == 6);
  const proto::RankCollectivesReport& real = report.ranks[0];
  CHECK(real.rank == 4);
  CHECK(real.error.empty());
  REQUIRE_FALSE(real.collectives.groups.empty());
  const proto::GroupProgress& group = real.collectives.groups[0];
  CHECK(group.desc == "default_pg");
  REQUIRE(group.first_incomplete);
  CHECK(group.first_incomplete->seq == 16);
  CHECK(group.first_incomplete->op == "all_reduce");
  CHECK(report.ranks[1].error.find("no flight-recorder pipe") == 0);
  CHECK(report.ranks[2].error == "no dump within 8 s");
  CHECK(report.ranks[3].error.find("not a flight-recorder dump: ") == 0);
  CHECK(report.ranks[4].error == "no whole dump within 8 s");
  CHECK(report.ranks[5].error.empty());
  CHECK(report.ranks[5].collectives.groups.size() == real.collectives.groups.size());
}

TEST_CASE("a rank sends its groups with a collective not completed first, at most eight",
          "[unit][agent][hang]") {
  std::vector<proto::GroupProgress> groups;
  for (int id = 0; id < 12; ++id) {
    proto::GroupProgress group;
    group.id = "g" + std::to_string(10 + id);
    if (id == 11) group.first_incomplete = proto::CollectiveCall{5, "broadcast", {}, {}, ""};
    groups.push_back(group);
  }
  std::vector<proto::GroupProgress> sent = groups_to_send(groups);
  REQUIRE(sent.size() == proto::kMaxSentProcessGroups);
  CHECK(std::any_of(sent.begin(), sent.end(),
                    [](const auto& group) { return group.id == "g21" && group.first_incomplete; }));
  CHECK(std::is_sorted(sent.begin(), sent.end(),
                       [](const auto& a, const auto& b) { return a.id < b.id; }));
}
