#include "rendezvous/daemon_events.hpp"

#include <catch2/catch.hpp>

using namespace cohort;
using nlohmann::json;

TEST_CASE("worker.failed fields name the failure and keep one bounded line of its summary",
          "[unit][rendezvous][events]") {
  proto::WorkerFailed failed;
  failed.round = 2;
  failed.rank = 5;
  failed.local_rank = 1;
  failed.exit_status = 3;
  failed.host = "gpu-7";
  failed.summary = "==========\n\n" + std::string(2000, 'x') + "\nsecond line\n";
  json fields = rdzv::worker_failed_fields("a:1#0", failed);
  CHECK(fields["node"] == "a:1#0");
  CHECK(fields["round"] == 2);
  CHECK(fields["rank"] == 5);
  CHECK(fields["local_rank"] == 1);
  CHECK(fields["status"] == "exit status 3");
  CHECK(fields["host"] == "gpu-7");
  CHECK(fields["summary"] == std::string(512, 'x') + "...");

  failed.description = "signal 9 (SIGKILL)";
  CHECK(rdzv::worker_failed_fields("a:1#0", failed)["status"] == "signal 9 (SIGKILL)");
}

TEST_CASE("hang.declared fields name the rank silent longest", "[unit][rendezvous][events]") {
  proto::Progress progress;
  progress.round = 4;
  progress.host = "gpu-1";
  progress.ranks = {{0, 200, 10, std::nullopt}, {1, 9000, 7, 120}, {2, 500, std::nullopt, 90}};
  json fields = rdzv::hang_fields("b:2#0", progress);
  CHECK(fields == json{{"node", "b:2#0"},
                       {"host", "gpu-1"},
                       {"round", 4},
                       {"local_rank", 1},
                       {"silent_ms", 9000},
                       {"step", 7}});

  progress.ranks.clear();
  CHECK(rdzv::hang_fields("b:2#0", progress) ==
        json{{"node", "b:2#0"}, {"host", "gpu-1"}, {"round", 4}});
}

TEST_CASE("hang.attributed fields say the primary group's collective and at most 16 hosts",
          "[unit][rendezvous][events]") {
  rdzv::HangVerdict verdict;
  verdict.text = "no collective waits";
  verdict.attribution.without_dump = {3, 4, 5, 9};
  json fields = rdzv::hang_attributed_fields(1, verdict);
  CHECK(fields["classification"] == "no_dumps");
  CHECK(fields["without_dump"] == "3-5,9");
  CHECK_FALSE(fields.contains("collective_seq"));
  verdict.had_dumps = true;
  CHECK(rdzv::hang_attributed_fields(1, verdict)["classification"] == "none");

  rdzv::GroupAttribution group;
  group.pg = "0";
  group.pg_desc = "default_pg";
  group.seq = 4120;
  group.op = "all_reduce";
  group.divergence = rdzv::Divergence::kMissing;
  group.ranks = 32;
  group.culprits = {7};
  for (int rank = 0; rank < 32; ++rank) {
    if (rank != 7) group.waiting.push_back(rank);
  }
  for (int host = 0; host < 20; ++host) group.culprit_hosts.push_back("h" + std::to_string(host));
  verdict.attribution.groups = {group};
  verdict.attribution.primary = 0;
  verdict.attribution.without_dump.clear();
  fields = rdzv::hang_attributed_fields(1, verdict);
  CHECK(fields["round"] == 1);
  CHECK(fields["pg_desc"] == "default_pg");
  CHECK(fields["collective_seq"] == 4120);
  CHECK_FALSE(fields.contains("seq"));  // the envelope's key: the line's own number
  CHECK(fields["op"] == "all_reduce");
  CHECK(fields["ranks"] == 32);
  CHECK(fields["culprit_ranks"] == "7");
  CHECK(fields["waiting_ranks"] == "0-6,8-31");
  CHECK(fields["culprit_hosts"].size() == 16);
  CHECK(fields["culprit_hosts"][15] == "h15");
}

TEST_CASE("round.started fields list the members with the hosts the run knows",
          "[unit][rendezvous][events]") {
  rdzv::StartRound start;
  start.round = 3;
  start.members = {{"a:1#0", "10.0.0.1", 3, 0, 2, 0, 4, 8},
                   {"b:1#0", "10.0.0.2", 3, 1, 2, 4, 4, 8}};
  json fields = rdzv::round_started_fields(start, {{"b:1#0", "gpu-2"}});
  CHECK(fields["round"] == 3);
  CHECK(fields["world_size"] == 8);
  REQUIRE(fields["members"].size() == 2);
  CHECK(
      fields["members"][0] ==
      json{{"node", "a:1#0"}, {"address", "10.0.0.1"}, {"group_rank", 0}, {"local_world_size", 4}});
  CHECK(fields["members"][1]["host"] == "gpu-2");
}

TEST_CASE("round.started says where a run taken over came from, on its first round only",
          "[unit][rendezvous][events]") {
  json fields = json::object();
  rdzv::add_resumed_fields(fields, 0, -1, "");  // the run began here
  CHECK(fields.empty());
  rdzv::add_resumed_fields(fields, 5, 3, "gpu-1:29400");  // a later round
  CHECK(fields.empty());
  rdzv::add_resumed_fields(fields, 4, 3, "");  // a restarted daemon
  CHECK(fields == json{{"resumed_after", 3}});
  rdzv::add_resumed_fields(fields, 4, 3, "gpu-1:29400");
  CHECK(fields == json{{"resumed_after", 3}, {"moved_from", "gpu-1:29400"}});
}
