// A failure every node reports the same way (a configuration error: 3 nodes x 2 workers, and a
// batch size that is not a multiple of 6) is the job's, not a host's: with real agents and
// cohortd on loopback addresses, no host is excluded, and the crash-loop rule ends the run within
// a few rounds with a summary that says so, instead of spending every restart.
#include <csignal>

#include "tests/integration/multinode_support.hpp"

using namespace cohort::test;

TEST_CASE("a failure every node reports the same way excludes no host and ends the run early",
          "[integration][exclusion]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon("127.0.0.1");
  std::vector<std::string> flags{"--nnodes",           "3:3",
                                 "--nproc-per-node",   "2",
                                 "--rdzv-id",          "shared",
                                 "--max-restarts",     "10",
                                 "--rdzv-conf",        "last_call_timeout=1,heartbeat_timeout=3",
                                 "--shutdown-timeout", "5"};
  // Every worker fails the same way half a second in; a worker told to stop (its node restarting
  // for another node's report) still fails so, as a real one past its check would.
  std::vector<std::string> worker{
      "/bin/sh", "-c",
      "trap '' TERM; sleep 0.5; echo 'ValueError: global batch size 32 is not a multiple of the "
      "world size 6' >&2; exit 1"};
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (const char* address : {"127.0.0.2", "127.0.0.3", "127.0.0.4"}) {
    nodes.push_back(cluster.node_running(address, flags, worker));
  }
  for (auto& node : nodes) {
    auto status = node->wait(90s);
    INFO(node->output());
    INFO(cluster.daemon().output());
    REQUIRE(status.has_value());
    CHECK(status->shell_code() == 1);
    CHECK_FALSE(contains(node->output(), "is excluded"));
    CHECK(contains(node->output(),
                   "every rank failed the same way: a configuration or code error, not a node"));
    // The crash-loop rule (the same failure 3 times in a row on a node, its failures during a
    // restart for another node's report included) ends it after 3 to 5 rounds (a node's
    // workers may be stopped before they fail in some), not 11.
    CHECK(contains(node->output(), "restart 2/10"));
    CHECK_FALSE(contains(node->output(), "restart 6/10"));
  }
  INFO(cluster.daemon().output());
  CHECK_FALSE(contains(cluster.daemon().output(), "is excluded"));
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}
