// The workers' progress across nodes, with real agents, a real cohortd and Python workers that
// heartbeat through the shipped module: a rank on node B that goes silent first is named as the
// root cause (rank, node, step) in the summary both nodes print, although node A's ranks went
// silent too, a second later; and a rank that sleeps extra each step shows in `cohort status`
// with its step time against the median, and is named a straggler. Each run is bounded in time.
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <regex>
#include <thread>

#include "tests/integration/multinode_support.hpp"

using namespace cohort::test;

namespace {

const std::string kHangWorker = std::string(kSourceDir) + "/tests/integration/hang_worker.py";

/// `cohort run` as node `address` of the cluster's run, running hang_worker.py `mode_args`.
std::unique_ptr<ChildProcess> python_node(Scratch& scratch, const Cluster& cluster,
                                          const std::string& address,
                                          const std::vector<std::string>& flags,
                                          const std::vector<std::string>& mode_args) {
  std::vector<std::string> args{"--rdzv-backend", "c10d",  "--rdzv-endpoint", cluster.endpoint(),
                                "--local-addr",   address, "--rdzv-id",       "progress"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back(kHangWorker);
  args.insert(args.end(), mode_args.begin(), mode_args.end());
  ChildOptions options = scratch.options({{"PYTHON_EXEC", kPython}});
  options.name = "node_" + address;
  return std::make_unique<ChildProcess>(Scratch::cohort_argv(args), options);
}

/// `cohort status --json` of the daemon at `endpoint`, read back; nullopt while none answers.
std::optional<cohort::proto::StatusReply> try_status(const std::string& endpoint,
                                                     const Scratch& scratch) {
  RunResult result = run_to_end({kCohortBin, "status", "--rdzv-endpoint", endpoint, "--json"},
                                scratch.options(), 10s);
  std::string error;
  if (!result.status.success()) return std::nullopt;
  return cohort::proto::decode_status_document(result.out, error);
}

}  // namespace

TEST_CASE("a hang on node B is named as the root cause on both nodes, with its rank and step",
          "[integration][multinode][hang]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  // Ranks 0-1 on 127.0.0.2 (A), 2-3 on 127.0.0.3 (B). Rank 3 stops after step 3; every other
  // rank a second later, as ranks blocked in a collective on it would. B notices first.
  std::vector<std::string> flags{"--nnodes",       "2", "--nproc-per-node", "2",
                                 "--hang-timeout", "3", "--max-restarts",   "0"};
  std::vector<std::string> mode{"silent-first", "3", "3"};
  auto node_a = python_node(scratch, cluster, "127.0.0.2", flags, mode);
  auto node_b = python_node(scratch, cluster, "127.0.0.3", flags, mode);
  auto status_b = node_b->wait(60s);
  auto status_a = node_a->wait(20s);
  INFO("A:\n" << node_a->output() << "\nB:\n" << node_b->output());
  REQUIRE(status_a);
  REQUIRE(status_b);
  CHECK(*status_a == cohort::ExitStatus::exited(128 + SIGABRT));
  CHECK(*status_b == cohort::ExitStatus::exited(128 + SIGABRT));
  std::regex root(
      R"(root cause across nodes: rank 3 on [^ ]+ \(127\.0\.0\.3\) stopped making progress at )"
      R"(step 3; 3 ranks waited on it\n)");
  CHECK(std::regex_search(node_a->output(), root));
  CHECK(std::regex_search(node_b->output(), root));
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

TEST_CASE("a rank that sleeps extra each step shows in cohort status and is named a straggler",
          "[integration][straggler]") {
  Scratch scratch;
  int port = free_daemon_port(scratch);
  std::string endpoint = "127.0.0.1:" + std::to_string(port);
  // One node hosting the rendezvous, 3 ranks; rank 2 takes 250 ms a step, the others 50 ms.
  auto agent = scratch.start(
      {"--nnodes", "1", "--nproc-per-node", "3", "--rdzv-backend", "c10d", "--rdzv-endpoint",
       endpoint, "--rdzv-id", "slow", kHangWorker, "straggler", "2"},
      {{"PYTHON_EXEC", kPython}, {"COHORT_STRAGGLER_WINDOW_MS", "1000"}});
  std::optional<cohort::proto::StatusRun> run;
  bool shown = wait_until(
      [&] {
        std::this_thread::sleep_for(300ms);  // a status query at most every 300 ms
        auto status = try_status(endpoint, scratch);
        if (!status || status->runs.size() != 1 || status->runs[0].slowest.size() < 3) {
          return false;
        }
        run = status->runs[0];
        return run->slowest[0].rank == 2 && run->slowest[2].step_ms > 0;
      },
      30s);
  INFO(agent->output());
  REQUIRE(shown);
  // 250 ms against 50 ms: beyond the straggler factor, 1.5.
  CHECK(run->slowest[0].step_ms * 2 > run->median_step_ms * 3);
  CHECK_FALSE(run->slowest[0].node.empty());
  RunResult table =
      run_to_end({kCohortBin, "status", "--rdzv-endpoint", endpoint}, scratch.options(), 10s);
  INFO(table.out << table.err);
  CHECK(table.status.success());
  CHECK(std::regex_search(
      table.out,
      std::regex(R"(slowest ranks \(1\.2 x the median step 0\.[0-9]+ s or slower\):\n    rank 2 )"
                 R"(on [^ ]+  0\.[0-9]+ s per step  [0-9.]+ x the median\n)")));
  // The ranks at the median's pace are not listed among the slowest.
  CHECK(table.out.find("x the median\n") == table.out.rfind("x the median\n"));
  REQUIRE(wait_until([&] { return contains(agent->output(), "is a straggler"); }, 15s));
  CHECK(std::regex_search(agent->output(),
                          std::regex(R"(rendezvous: run slow: rank 2 on [^ ]+ is a straggler: )"
                                     R"(0\.[0-9]+ s per step, [0-9.]+ x the run's median)")));
  std::ofstream(scratch.file("stop")).close();
  auto exit = agent->wait(30s);
  REQUIRE(exit);
  CHECK(exit->success());
  CHECK(scratch.nothing_left());
}
