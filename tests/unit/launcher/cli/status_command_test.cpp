#include <catch2/catch.hpp>
#include <sstream>

#include "launcher/cli/status_command.hpp"

using namespace cohort;

TEST_CASE("cohort status prints one line per run and one per node", "[unit][launcher]") {
  proto::StatusRun running{"alpha", "running", 0, 1, 3, 1, 2, 38517, {}};
  running.nodes.push_back({"127.0.0.2:3895:59458#0", "127.0.0.2", "member", 0, 2, false});
  running.nodes.push_back({"127.0.0.4:3897:1#0", "127.0.0.4", "member", 1, 1, true});
  proto::StatusRun forming{"beta", "forming", -1, 0, 0, 2, 2, 0, {}};
  forming.nodes.push_back({"127.0.0.3:3896:66931#0", "127.0.0.3", "joining", -1, 1, false});
  std::ostringstream out;
  print_status_table(proto::StatusReply{36035, {running, forming}}, out);
  CHECK(out.str() ==
        "run alpha: running, round 0, restarts 1/3, nodes 1:2, worker store port 38517\n"
        "  127.0.0.2  member  rank 0  workers 2  (127.0.0.2:3895:59458#0)\n"
        "  127.0.0.4  member  rank 1  workers 1  done  (127.0.0.4:3897:1#0)\n"
        "run beta: forming, waiting for the first round, restarts 0/0, nodes 2:2, worker store "
        "port 0\n"
        "  127.0.0.3  joining  workers 1  (127.0.0.3:3896:66931#0)\n");
}

TEST_CASE("cohort status --brief prints each run's node counts instead of its nodes",
          "[unit][launcher]") {
  proto::StatusRun big{"big", "running", 3, 0, 1, 2, 20000, 38517, {}};
  big.more_nodes = 10000;
  big.live_nodes = 9998;
  proto::StatusRun one{"one", "forming", -1, 0, 0, 1, 1, 0, {}};
  one.more_nodes = 1;
  one.live_nodes = 0;
  std::ostringstream out;
  print_status_table(proto::StatusReply{36035, {big, one}}, out);
  CHECK(out.str() ==
        "run big: running, round 3, restarts 0/1, nodes 2:20000, worker store port 38517\n"
        "  10000 nodes, 9998 heard within the heartbeat timeout\n"
        "run one: forming, waiting for the first round, restarts 0/0, nodes 1:1, worker store port "
        "0\n"
        "  1 node, 0 heard within the heartbeat timeout\n");
}

TEST_CASE("cohort status says when the daemon has no runs", "[unit][launcher]") {
  std::ostringstream out;
  print_status_table(proto::StatusReply{29400, {}}, out);
  CHECK(out.str() == "no runs\n");
}

TEST_CASE("cohort status shows the slowest ranks against the median step time",
          "[unit][launcher][straggler]") {
  proto::StatusRun running{"alpha", "running", 0, 0, 0, 2, 2, 38517, {}};
  running.median_step_ms = 100;
  running.slowest = {{3, "vm (127.0.0.3)", 310}, {0, "vm (127.0.0.2)", 101}};
  std::ostringstream out;
  print_status_table(proto::StatusReply{36035, {running}}, out);
  CHECK(out.str() ==
        "run alpha: running, round 0, restarts 0/0, nodes 2:2, worker store port 38517\n"
        "  slowest ranks (1.2 x the median step 0.100 s or slower):\n"
        "    rank 3 on vm (127.0.0.3)  0.310 s per step  3.10 x the median\n");
  // Every rank near the median: no stragglers, rather than a list of ranks at 1.00 x.
  running.slowest = {{3, "vm (127.0.0.3)", 101}, {0, "vm (127.0.0.2)", 100}};
  std::ostringstream even;
  print_status_table(proto::StatusReply{36035, {running}}, even);
  CHECK(even.str() ==
        "run alpha: running, round 0, restarts 0/0, nodes 2:2, worker store port 38517\n"
        "  no stragglers: no rank at 1.2 x the median step (0.100 s) or slower\n");
  // An older daemon's document, without the new keys, still reads.
  std::string error;
  auto old = proto::decode_status_document(
      R"({"port":1,"runs":[{"run_id":"a","phase":"running","round":0,"restarts_used":0,)"
      R"("max_restarts":0,"min_nodes":1,"max_nodes":1,"store_port":0,"nodes":[]}]})",
      error);
  INFO(error);
  REQUIRE(old);
  CHECK(old->runs.at(0).slowest.empty());
}

TEST_CASE("cohort status says why the run last restarted, the hang's collective first",
          "[unit][launcher][hang]") {
  proto::StatusRun running{"alpha", "running", 1, 1, 3, 2, 2, 38517, {}};
  running.last_failure =
      "all_reduce #120 on default_pg (4 ranks): 3 ranks enqueued it and wait; rank 1 (node-a) "
      "never did, its last was #119 (all_reduce) (worker rank 3 on node-b failed with signal 6 "
      "(SIGABRT)) (restart 1/3)";
  std::ostringstream out;
  print_status_table(proto::StatusReply{36035, {running}}, out);
  CHECK(out.str() ==
        "run alpha: running, round 1, restarts 1/3, nodes 2:2, worker store port 38517\n"
        "  last failure: " +
            running.last_failure + "\n");
}

TEST_CASE("cohort status says after which round a run was taken over, and where it ran",
          "[unit][launcher]") {
  proto::StatusRun moved{"moved", "running", 4, 0, 1, 1, 2, 38517, {}};
  moved.resumed_after = 3;
  moved.moved_from = "gpu-1:29400";
  proto::StatusRun restarted{"restarted", "forming", -1, 0, 1, 1, 2, 0, {}};
  restarted.resumed_after = 0;
  std::ostringstream out;
  print_status_table(proto::StatusReply{36035, {moved, restarted}}, out);
  CHECK(out.str() ==
        "run moved: running, round 4, restarts 0/1, nodes 1:2, worker store port 38517\n"
        "  resumed here after round 3, which ran at gpu-1:29400 (--rdzv-fallback)\n"
        "run restarted: forming, waiting for the first round, restarts 0/1, nodes 1:2, worker "
        "store port 0\n"
        "  resumed here after round 0 (the daemon restarted)\n");
  moved.moved_from = "evil\x1b]0;x\x07:1";  // a node's words: no terminal sequence gets through
  std::ostringstream escaped;
  print_status_table(proto::StatusReply{36035, {moved}}, escaped);
  CHECK(escaped.str().find('\x1b') == std::string::npos);
}

TEST_CASE("cohort status says where a run whose nodes all left this daemon went",
          "[unit][launcher]") {
  proto::StatusReply reply{36035, {}};
  reply.moved_runs.push_back({"follow", "node2:29400"});
  std::ostringstream out;
  print_status_table(reply, out);
  CHECK(out.str() ==
        "run follow: moved to node2:29400 (its nodes left this daemon for it: ask there, or give "
        "--rdzv-fallback)\n");
}
