// Which collective, which rank, with real agents on two loopback addresses, a real cohortd and
// Python workers that make their NCCL debug-info pipes like PyTorch and, once a pipe is written,
// write a flight-recorder dump 1 s later (dumps the test wrote in PyTorch 2.11's shape). Rank 3
// on node B goes silent first, so B declares the hang; the dumps say that rank 1, on node A,
// never enqueued all_reduce #120 that the others wait in. Both nodes' summaries name rank 1 with
// the op and the sequence number, and the daemon's event log has hang.attributed. Bounded.
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>

#include "tests/integration/multinode_support.hpp"
#include "tests/support/flight_recorder_dump_writer.hpp"

using namespace cohort::test;

namespace {

const std::string kHangWorker = std::string(kSourceDir) + "/tests/integration/hang_worker.py";

std::unique_ptr<ChildProcess> dump_node(Scratch& scratch, const Cluster& cluster,
                                        const std::string& address,
                                        const std::vector<std::string>& worker_args) {
  std::vector<std::string> args{"--rdzv-backend",
                                "c10d",
                                "--rdzv-endpoint",
                                cluster.endpoint(),
                                "--local-addr",
                                address,
                                "--rdzv-id",
                                "collective",
                                "--nnodes",
                                "2",
                                "--nproc-per-node",
                                "2",
                                "--hang-timeout",
                                "3",
                                "--max-restarts",
                                "0",
                                "--hang-dump-timeout",
                                "8",
                                kHangWorker};
  args.insert(args.end(), worker_args.begin(), worker_args.end());
  ChildOptions options = scratch.options({{"PYTHON_EXEC", kPython}});
  options.name = "node_" + address;
  return std::make_unique<ChildProcess>(Scratch::cohort_argv(args), options);
}

// Every rank completed all_reduce #119; ranks 0, 2 and 3 enqueued #120 and wait in it, rank 1
// never did. Returns the directory of rank<R>.pkl.
std::string write_round_dumps(Scratch& scratch) {
  std::string dumps = scratch.file("dumps");
  std::filesystem::create_directories(dumps);
  for (int rank = 0; rank < 4; ++rank) {
    DumpGroup group;
    group.ranks = "[0, 1, 2, 3]";
    group.first_seq = 100;
    group.last_completed = 119;
    group.last_enqueued = rank == 1 ? 119 : 120;
    std::ofstream(dumps + "/rank" + std::to_string(rank) + ".pkl", std::ios::binary)
        << write_flight_recorder_dump({.groups = {group}});
  }
  return dumps;
}

const std::string kNamed =
    "collective: all_reduce #120 on default_pg (4 ranks): 3 ranks enqueued it and wait; rank 1";

}  // namespace

TEST_CASE("a rank that never enqueued the collective is named on both nodes and in the events",
          "[integration][multinode][hang]") {
  Scratch scratch;
  Cluster cluster(scratch);
  std::string events = scratch.file("events.jsonl");
  cluster.start_daemon("127.0.0.1", {"--event-log", events});
  std::string dumps = write_round_dumps(scratch);
  std::vector<std::string> worker{"collective-dumps", dumps, "3", "3"};
  auto node_a = dump_node(scratch, cluster, "127.0.0.2", worker);
  auto node_b = dump_node(scratch, cluster, "127.0.0.3", worker);
  auto status_b = node_b->wait(60s);
  auto status_a = node_a->wait(20s);
  INFO("A:\n" << node_a->output() << "\nB:\n" << node_b->output());
  INFO("cohortd:\n" << cluster.daemon().output());
  REQUIRE(status_a);
  REQUIRE(status_b);
  CHECK(contains(node_a->output(), kNamed));
  CHECK(contains(node_b->output(), kNamed));
  CHECK(contains(node_a->output(), "never did, its last was #119 (all_reduce)"));
  CHECK(cluster.stop_daemon());
  std::string log = read_file(events);
  INFO(log);
  CHECK(contains(log, R"("event":"hang.attributed")"));
  CHECK(contains(log, R"("classification":"missing")"));
  CHECK(contains(log, R"("culprit_ranks":"1")"));
  CHECK(contains(log, R"("waiting_ranks":"0,2-3")"));
  CHECK(contains(log, R"("collective_seq":120)"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("the dumps PyTorch's watchdog writes on a collective timeout are read on every node",
          "[integration][multinode][hang]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  // No hang for cohort to declare: each rank writes its dump by itself and fails, as PyTorch's
  // watchdog does with TORCH_NCCL_DUMP_ON_TIMEOUT.
  std::vector<std::string> worker{"watchdog-dumps", write_round_dumps(scratch)};
  auto node_a = dump_node(scratch, cluster, "127.0.0.2", worker);
  auto node_b = dump_node(scratch, cluster, "127.0.0.3", worker);
  auto status_a = node_a->wait(60s);
  auto status_b = node_b->wait(20s);
  INFO("A:\n" << node_a->output() << "\nB:\n" << node_b->output());
  INFO("cohortd:\n" << cluster.daemon().output());
  REQUIRE(status_a);
  REQUIRE(status_b);
  CHECK(*status_a == cohort::ExitStatus::exited(1));
  CHECK(contains(node_a->output(), kNamed));
  CHECK(contains(node_b->output(), kNamed));
  CHECK(contains(node_a->output(), "Watchdog caught collective operation timeout"));
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}
