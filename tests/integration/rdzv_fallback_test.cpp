// --rdzv-fallback: three agents without cohortd, the first hosting the rendezvous at
// --rdzv-endpoint. When that agent dies, the others move to the fallback endpoint (one of them
// hosts it) and go on in a smaller round; when it takes another node with it, the last one is no
// majority of the last round and forms none: it ends after the join timeout, saying why.
#include <csignal>

#include "common/free_port.hpp"
#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

const std::vector<std::string> kAddresses{"127.0.0.2", "127.0.0.3", "127.0.0.4"};

struct FallbackRun {
  Scratch scratch;
  std::string endpoint = "127.0.0.1:" + std::to_string(cohort::pick_free_port("127.0.0.1"));
  std::string fallback = "127.0.0.1:" + std::to_string(cohort::pick_free_port("127.0.0.1"));
  std::vector<std::unique_ptr<ChildProcess>> nodes;

  // Three nodes whose workers record their env and then run `sleep_ms`; the first node starts
  // alone and hosts the rendezvous at the endpoint before the others come.
  FallbackRun(int sleep_ms, const std::string& join_timeout) {
    for (size_t i = 0; i < kAddresses.size(); ++i) {
      nodes.push_back(scratch.start(
          {"--nnodes",
           "1:3",
           "--nproc-per-node",
           "1",
           "--rdzv-backend",
           "c10d",
           "--rdzv-endpoint",
           endpoint,
           "--rdzv-fallback",
           fallback,
           "--rdzv-id",
           "moving",
           "--rdzv-conf",
           "last_call_timeout=0.5,heartbeat_timeout=1,keep_alive_interval=0.2,join_timeout=" +
               join_timeout,
           "--local-addr",
           kAddresses[i],
           "--shutdown-timeout",
           "2",
           "--no-python",
           kTestWorkerBin,
           "--dump-env",
           scratch.file("env_{TORCHELASTIC_RESTART_COUNT}_{RANK}.json"),
           "--sleep-ms",
           std::to_string(sleep_ms)}));
      if (i == 0) {
        REQUIRE(
            wait_until([&] { return contains(nodes[0]->err(), "now hosts the rendezvous"); }, 10s));
      }
    }
    REQUIRE(wait_until([&] { return dumps_of_round(0) == 3; }, 20s));
  }
  ~FallbackRun() {
    for (auto& node : nodes) node->signal(SIGTERM);
    for (auto& node : nodes) node->wait(10s);
  }

  size_t dumps_of_round(int round) const {
    size_t count = 0;
    for (const auto& name : entries_starting_with(scratch.path(), "env_" + std::to_string(round))) {
      count += ends_with(name, ".json");
    }
    return count;
  }
  EnvDump dump(int round, int rank) const {
    return load_env(
        scratch.file("env_" + std::to_string(round) + "_" + std::to_string(rank) + ".json"));
  }
};

}  // namespace

TEST_CASE("the agent hosting the rendezvous dies: the others move to --rdzv-fallback and go on",
          "[integration][multinode][fallback]") {
  FallbackRun run(/*sleep_ms=*/8000, /*join_timeout=*/"30");
  std::string round0_port = env_value(run.dump(0, 0), "MASTER_PORT");
  run.nodes[0]->signal(SIGKILL);  // the host of the rendezvous, as a node that crashed
  for (size_t i = 1; i < 3; ++i) {
    auto status = run.nodes[i]->wait(30s);
    INFO(run.nodes[i]->output());
    REQUIRE(status);
    CHECK(status->success());  // the run completed, in a round of two
    CHECK(contains(run.nodes[i]->err(), "the rendezvous moves to " + run.fallback +
                                            " (--rdzv-fallback; the workers keep running)"));
  }
  std::string hosted = "hosting the rendezvous on " + run.fallback + " (--rdzv-fallback)";
  CHECK(contains(run.nodes[1]->err(), hosted) != contains(run.nodes[2]->err(), hosted));  // one
  REQUIRE(run.dumps_of_round(1) == 2);
  for (int rank = 0; rank < 2; ++rank) {
    EnvDump env = run.dump(1, rank);
    CHECK(env_value(env, "WORLD_SIZE") == "2");
    CHECK(env_value(env, "TORCHELASTIC_RESTART_COUNT") == "1");  // the round count goes on
    CHECK(env_value(env, "MASTER_PORT") != round0_port);         // the fallback's worker store
  }
  CHECK(run.scratch.nothing_left());  // the killed agent's worker too
}

TEST_CASE("one node of three is no majority: it forms no round at the fallback and says why",
          "[integration][multinode][fallback]") {
  FallbackRun run(/*sleep_ms=*/60000, /*join_timeout=*/"4");
  run.nodes[0]->signal(SIGKILL);
  run.nodes[1]->signal(SIGKILL);
  auto status = run.nodes[2]->wait(30s);
  INFO(run.nodes[2]->output());
  REQUIRE(status);
  CHECK(status->shell_code() == 3);
  CHECK(contains(run.nodes[2]->err(), "hosting the rendezvous on " + run.fallback));
  CHECK(contains(run.nodes[2]->err(),
                 "1 of at least 2 nodes joined within the join timeout (4 s): with "
                 "--rdzv-fallback a round needs more than half of the last round's 3 nodes"));
  CHECK(run.dumps_of_round(1) == 0);
  CHECK(run.scratch.nothing_left());
}
