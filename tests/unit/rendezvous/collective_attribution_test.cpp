// attribute_collectives: rounds of 2 to 64 ranks whose flight-recorder dumps (written in
// PyTorch's shape by tests/support, then read by the real reader and reducer) show a missing
// collective, a desync, a collective stuck in the network, several process groups, ranks without
// a dump or with a corrupt one; and the rank ranges of its text.
#include "rendezvous/collective_attribution.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "tests/support/flight_recorder_dump_writer.hpp"
#include "tests/support/test_paths.hpp"

using namespace cohort::rdzv;
using cohort::test::DumpGroup;
using cohort::test::RankDumpSpec;
using cohort::test::write_flight_recorder_dump;

namespace {

// Eight ranks a node: node-a holds ranks 0-7, node-b 8-15, ...
std::string host_of(int rank) { return std::string("node-") + static_cast<char>('a' + rank / 8); }

// The default group of `ranks` ranks, every rank through collective `completed` and waiting in
// `completed + 1`; `change` makes a rank's differ.
std::map<int, RankDumpFile> round_of(int ranks, int64_t completed,
                                     const std::function<void(int, DumpGroup&)>& change = {}) {
  std::map<int, RankDumpFile> files;
  for (int rank = 0; rank < ranks; ++rank) {
    DumpGroup group;
    group.ranks = "[" + std::to_string(rank) + "]";
    group.first_seq = std::max<int64_t>(1, completed - 10);
    group.last_completed = completed;
    group.last_enqueued = completed + 1;
    if (change) change(rank, group);
    files[rank] = RankDumpFile{host_of(rank), write_flight_recorder_dump({.groups = {group}})};
  }
  return files;
}

std::vector<int> range(int first, int last) {
  std::vector<int> out;
  for (int rank = first; rank <= last; ++rank) out.push_back(rank);
  return out;
}

std::vector<int> all_but(int ranks, std::vector<int> except) {
  std::vector<int> out;
  for (int rank = 0; rank < ranks; ++rank) {
    if (std::find(except.begin(), except.end(), rank) == except.end()) out.push_back(rank);
  }
  return out;
}

const GroupAttribution& primary(const CollectiveAttribution& verdict) {
  REQUIRE(verdict.primary);
  return verdict.groups.at(*verdict.primary);
}

}  // namespace

TEST_CASE("rank ranges are compressed and cut to their length", "[unit][rendezvous]") {
  CHECK(rank_ranges_text({}) == "");
  CHECK(rank_ranges_text({5}) == "5");
  CHECK(rank_ranges_text({0, 1}) == "0-1");
  std::vector<int> ranks = range(0, 12);
  for (int rank = 14; rank <= 31; ++rank) ranks.push_back(rank);
  CHECK(rank_ranges_text(ranks) == "0-12,14-31");
  std::vector<int> even;
  for (int rank = 0; rank < 200; rank += 2) even.push_back(rank);
  CHECK(rank_ranges_text(even, 20) == "0,2,4,6,8,10,12,14,... (92 more)");
  CHECK(rank_ranges_text(even).size() < 120);
}

TEST_CASE("a rank that never enqueued the collective the others wait in is the culprit",
          "[unit][rendezvous]") {
  // 32 ranks wait in all_reduce #4120; rank 13 is still before it, its last an allgather.
  auto files = round_of(32, 4119, [](int rank, DumpGroup& group) {
    group.ops[4119] = "_allgather_base";
    if (rank == 13) group.last_enqueued = 4119;
  });
  CollectiveAttribution verdict = attribute_dump_files(files);
  CHECK(verdict.text ==
        "all_reduce #4120 on default_pg (32 ranks): 31 ranks enqueued it and wait; rank 13 "
        "(node-b) never did, its last was #4119 (_allgather_base)");
  REQUIRE(verdict.groups.size() == 1);
  const GroupAttribution& group = primary(verdict);
  CHECK(group.divergence == Divergence::kMissing);
  CHECK(std::string(divergence_name(group.divergence)) == "missing");
  CHECK(group.pg == "0");
  CHECK(group.pg_desc == "default_pg");
  CHECK(group.seq == 4120);
  CHECK(group.op == "all_reduce");
  CHECK(group.ranks == 32);
  CHECK(group.culprits == std::vector<int>{13});
  CHECK(group.culprit_hosts == std::vector<std::string>{"node-b"});
  CHECK(group.waiting == all_but(32, {13}));
  CHECK(verdict.without_dump.empty());
}

TEST_CASE("several ranks missing a collective are named as ranges with their hosts",
          "[unit][rendezvous]") {
  auto files = round_of(64, 299, [](int rank, DumpGroup& group) {
    group.ops[299] = "broadcast";
    if (rank == 5 || rank == 40) group.last_enqueued = group.last_completed = 299;
  });
  CollectiveAttribution verdict = attribute_dump_files(files);
  const GroupAttribution& group = primary(verdict);
  CHECK(group.divergence == Divergence::kMissing);
  CHECK(group.seq == 300);
  CHECK(group.culprits == std::vector<int>{5, 40});
  CHECK(group.culprit_hosts == std::vector<std::string>{"node-a", "node-f"});
  CHECK(verdict.text ==
        "all_reduce #300 on default_pg (64 ranks): 62 ranks enqueued it and wait; ranks 5,40 "
        "(node-a, node-f) never did, their last was #299 (broadcast)");

  // Every odd rank of 64 missing, with lasts that differ: the text stays short.
  files = round_of(64, 300, [](int rank, DumpGroup& group) {
    if (rank % 2 == 1) group.last_enqueued = group.last_completed = 300 - rank % 4;
  });
  verdict = attribute_dump_files(files);
  CHECK(primary(verdict).culprits.size() == 32);
  CHECK(primary(verdict).culprit_hosts.size() == 8);
  CHECK(verdict.text.size() < 360);
  CHECK(verdict.text.find("(node-a, node-b, node-c and 5 more hosts) never did, their last were "
                          "#297 (all_reduce) to #299 (all_reduce)") != std::string::npos);
}

TEST_CASE("ranks that enqueued different ops as the same collective are a desync",
          "[unit][rendezvous]") {
  // Rank 7 broadcasts where ranks 0-6 all_reduce.
  auto files = round_of(8, 11, [](int rank, DumpGroup& group) {
    if (rank == 7) group.ops[12] = "broadcast";
  });
  CollectiveAttribution verdict = attribute_dump_files(files);
  const GroupAttribution& group = primary(verdict);
  CHECK(group.divergence == Divergence::kDesync);
  CHECK(group.seq == 12);
  CHECK(group.op == "all_reduce");
  CHECK(group.waiting == range(0, 6));
  CHECK(group.culprits == std::vector<int>{7});
  CHECK(group.culprit_hosts == std::vector<std::string>{"node-a"});
  CHECK(verdict.text ==
        "all_reduce #12 on default_pg (8 ranks): ranks disagree on it: ranks 0-6 enqueued "
        "all_reduce [[1048576]] Float; rank 7 (node-a) enqueued broadcast [[1048576]] Float");
}

TEST_CASE("ranks that enqueued the same op with other shapes are a desync", "[unit][rendezvous]") {
  auto files = round_of(16, 99, [](int rank, DumpGroup& group) {
    if (rank >= 9 && rank <= 10) group.sizes_at[100] = {{524288}};
    if (rank == 15) group.sizes_at[100] = {{1048576}, {16}};
  });
  CollectiveAttribution verdict = attribute_dump_files(files);
  const GroupAttribution& group = primary(verdict);
  CHECK(group.divergence == Divergence::kDesync);
  CHECK(group.waiting == all_but(16, {9, 10, 15}));
  CHECK(group.culprits == std::vector<int>{9, 10, 15});
  CHECK(group.culprit_hosts == std::vector<std::string>{"node-b"});
  CHECK(verdict.text ==
        "all_reduce #100 on default_pg (16 ranks): ranks disagree on it: ranks 0-8,11-14 "
        "enqueued all_reduce [[1048576]] Float; ranks 9-10 (node-b) enqueued all_reduce "
        "[[524288]] Float; rank 15 (node-b) enqueued all_reduce [[1048576], [16]] Float,Float");
}

TEST_CASE("a collective every rank started and none completed is stuck in the network",
          "[unit][rendezvous]") {
  auto files = round_of(16, 49, [](int, DumpGroup& group) { group.last_started = 50; });
  CollectiveAttribution verdict = attribute_dump_files(files);
  const GroupAttribution& group = primary(verdict);
  CHECK(group.divergence == Divergence::kStuck);
  CHECK(group.seq == 50);
  CHECK(group.waiting == range(0, 15));
  CHECK(group.culprits.empty());
  CHECK(verdict.text ==
        "all_reduce #50 on default_pg (16 ranks): every rank started it and none completed it: "
        "stuck in the network or on a GPU");

  // Without start times (PyTorch's default) every rank shows it enqueued.
  verdict = attribute_dump_files(round_of(2, 49));
  CHECK(primary(verdict).divergence == Divergence::kStuck);
  CHECK(verdict.text ==
        "all_reduce #50 on default_pg (2 ranks): every rank enqueued it and none completed it "
        "(no start recorded): stuck in the network or on a GPU");
}

TEST_CASE("a group that some of its ranks did not report is not called stuck",
          "[unit][rendezvous]") {
  // pg "9" has ranks 0 and 1; rank 0 waits in its #5, rank 1's report leaves the group out (a
  // report carries a rank's first 8 groups). Rank 1 may well never have enqueued #5.
  DumpGroup waiting;
  waiting.name = "9";
  waiting.desc = "pg9";
  waiting.ranks = "[0, 1]";
  waiting.pg_id = 9;
  waiting.last_completed = 4;
  waiting.last_enqueued = 5;
  DumpGroup other = waiting;
  other.name = "3";
  other.desc = "pg3";
  other.pg_id = 3;
  other.last_enqueued = 4;
  std::map<int, RankDumpFile> files;
  files[0] = RankDumpFile{"node-a", write_flight_recorder_dump({.groups = {waiting}})};
  files[1] = RankDumpFile{"node-a", write_flight_recorder_dump({.groups = {other}})};
  CollectiveAttribution verdict = attribute_dump_files(files);
  const GroupAttribution& group = primary(verdict);
  CHECK(group.divergence == Divergence::kUnknown);
  CHECK(verdict.text ==
        "all_reduce #5 on pg9 (1 rank): 1 rank enqueued it and waits; 1 of its 2 ranks did not "
        "report it");
}

TEST_CASE("of several process groups the one where ranks part ways is named",
          "[unit][rendezvous]") {
  // The world (pg 0) has finished #20 on every rank; tp_group (pg 1, ranks 0-3) waits in
  // _allgather_base #9, which rank 3 never enqueued.
  auto make = [](int ranks, bool world_waits) {
    std::map<int, RankDumpFile> files;
    for (int rank = 0; rank < ranks; ++rank) {
      DumpGroup world;
      world.first_seq = 11;
      world.last_enqueued = world.last_completed = 20;
      DumpGroup tp;
      tp.name = "1";
      tp.desc = "tp_group";
      tp.pg_id = 1;
      tp.op = "_allgather_base";
      tp.last_completed = 8;
      tp.last_enqueued = rank == 3 ? 8 : 9;
      // Ranks 4-7 moved on to the world's #21, which ranks 0-3 never enqueued.
      if (world_waits && rank >= 4) world.last_enqueued = 21;
      RankDumpSpec spec;
      spec.groups = {world};
      if (rank < 4) spec.groups.push_back(tp);
      files[rank] = RankDumpFile{host_of(rank), write_flight_recorder_dump(spec)};
    }
    return files;
  };
  CollectiveAttribution verdict = attribute_dump_files(make(4, false));
  REQUIRE(verdict.groups.size() == 1);
  CHECK(verdict.text ==
        "_allgather_base #9 on tp_group (4 ranks): 3 ranks enqueued it and wait; rank 3 (node-a) "
        "never did, its last was #8 (_allgather_base)");

  // With 8 ranks, 4-7 wait in the world's #21 that 0-3 never enqueued: both groups miss a
  // collective, and the one whose culprit waits nowhere else (rank 3, in tp_group) is named.
  verdict = attribute_dump_files(make(8, true));
  REQUIRE(verdict.groups.size() == 2);
  CHECK(verdict.groups[0].pg == "0");
  CHECK(verdict.groups[0].divergence == Divergence::kMissing);
  CHECK(verdict.groups[0].culprits == range(0, 3));
  CHECK(verdict.groups[1].pg == "1");
  CHECK(primary(verdict).pg == "1");
  CHECK(primary(verdict).culprits == std::vector<int>{3});
  CHECK(verdict.text.starts_with("_allgather_base #9 on tp_group (4 ranks): "));
}

TEST_CASE("ranks without a dump or with a corrupt one are listed and the others still used",
          "[unit][rendezvous]") {
  auto files = round_of(8, 4119, [](int rank, DumpGroup& group) {
    if (rank == 6) group.last_enqueued = 4119;
  });
  files[2].bytes.reset();                              // wrote none
  files[4].bytes->resize(files[4].bytes->size() / 2);  // cut short
  files[5].bytes = std::string("\x80\x02\x63os\nsystem\n.");
  CollectiveAttribution verdict = attribute_dump_files(files);
  CHECK(verdict.without_dump == std::vector<int>{2, 4, 5});
  const GroupAttribution& group = primary(verdict);
  CHECK(group.divergence == Divergence::kMissing);
  CHECK(group.culprits == std::vector<int>{6});
  CHECK(group.ranks == 5);
  CHECK(verdict.text ==
        "all_reduce #4120 on default_pg (5 ranks): 4 ranks enqueued it and wait; rank 6 (node-a) "
        "never did, its last was #4119 (all_reduce); no dump from ranks 2,4-5 (node-a)");

  // Without the others' dumps, ranks that all wait are not called stuck: the silent rank may
  // be the one.
  files = round_of(4, 15);
  files[2].bytes.reset();
  files[3].host = "node-z";
  files[3].bytes.reset();
  verdict = attribute_dump_files(files);
  CHECK(primary(verdict).divergence == Divergence::kUnknown);
  CHECK(verdict.text ==
        "all_reduce #16 on default_pg (2 ranks): 2 ranks enqueued it and wait; no dump from ranks "
        "2-3 (node-a, node-z)");

  // Nothing readable at all.
  files = round_of(2, 15);
  files[0].bytes = "";
  files[1].bytes.reset();
  verdict = attribute_dump_files(files);
  CHECK(verdict.groups.empty());
  CHECK(verdict.text ==
        "no collective waits in the flight-recorder dumps; no dump from ranks 0-1 "
        "(node-a)");
}

TEST_CASE("the PyTorch 2.11 dump of one rank of two names its queued all_reduce",
          "[unit][rendezvous]") {
  std::ifstream in(std::string(cohort::test::kSourceDir) +
                       "/tests/data/flight_recorder/torch-2.11-one-rank-queued-allreduce.pkl",
                   std::ios::binary);
  REQUIRE(in);
  std::map<int, RankDumpFile> files;
  files[0] = RankDumpFile{
      "node-a", std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())};
  files[1] = RankDumpFile{"node-b", std::nullopt};
  CollectiveAttribution verdict = attribute_dump_files(files);
  const GroupAttribution& group = primary(verdict);
  CHECK(group.seq == 16);
  CHECK(group.op == "all_reduce");
  CHECK(group.waiting == std::vector<int>{0});
  CHECK(verdict.text ==
        "all_reduce #16 on default_pg (1 rank): 1 rank enqueued it and waits; no dump from rank 1 "
        "(node-b)");
}

TEST_CASE("dumps where no rank waits show no divergence", "[unit][rendezvous]") {
  auto files = round_of(4, 30, [](int, DumpGroup& group) { group.last_enqueued = 30; });
  CollectiveAttribution verdict = attribute_dump_files(files);
  CHECK(verdict.groups.empty());
  CHECK_FALSE(verdict.primary);
  CHECK(verdict.text == "no collective waits in the flight-recorder dumps");
  // Some ranks completed #31 and others still wait in it: ranks wait, but nothing diverges.
  files = round_of(4, 30, [](int rank, DumpGroup& group) {
    if (rank < 2) group.last_completed = 31;
  });
  verdict = attribute_dump_files(files);
  CHECK(primary(verdict).divergence == Divergence::kUnknown);
  CHECK(verdict.text ==
        "all_reduce #31 on default_pg (4 ranks): 2 ranks enqueued it and wait; ranks 0-1 "
        "completed it or show no wait");
}
