// A partitioned node: one agent runs in its own network namespace, linked to this host by a veth
// pair on the test's own addresses; taking the link down must be detected by heartbeat timeout.
// Needs root (network namespaces): without it the test fails, saying so.
#include <unistd.h>

#include <csignal>

#include "tests/integration/multinode_support.hpp"
#include "tests/integration/netns_support.hpp"

using namespace cohort::test;

TEST_CASE("a node whose link goes down is lost by heartbeat timeout",
          "[integration][multinode][netns]") {
  require_prerequisite(::geteuid() == 0, "root, for network namespaces (run the tests as root)");
  NetnsNode partitioned;
  require_prerequisite(partitioned.ready,
                       "network namespaces and veth pairs (ip netns, ip link: iproute2)");
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.use_token();  // beyond loopback, cohortd needs one
  cluster.start_daemon("0.0.0.0");
  std::vector<std::string> flags{
      "--nnodes",           "2:3",
      "--nproc-per-node",   "2",
      "--rdzv-id",          "ns",
      "--rdzv-conf",        "last_call_timeout=1,heartbeat_timeout=1.5,keep_alive_interval=0.2",
      "--shutdown-timeout", "2"};
  std::vector<std::string> worker{
      "--dump-env", scratch.file("env_{TORCHELASTIC_RESTART_COUNT}_{RANK}.json"), "--hang"};
  auto a = cluster.node("127.0.0.2", flags, worker);
  auto b = cluster.node("127.0.0.3", flags, worker);
  std::vector<std::string> args{"netns", "exec",         partitioned.ns,      kCohortBin,
                                "run",   "--token-file", cluster.token_file()};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<std::string> tail{
      "--rdzv-backend",  "c10d",
      "--rdzv-endpoint", partitioned.host_ip + ":" + std::to_string(cluster.port()),
      "--local-addr",    partitioned.ns_ip,
      "--no-python",     kTestWorkerBin};
  args.insert(args.end(), tail.begin(), tail.end());
  args.insert(args.end(), worker.begin(), worker.end());
  args.insert(args.begin(), "/usr/sbin/ip");
  ChildOptions options = scratch.options();
  options.name = "netns_node";
  auto c = std::make_unique<ChildProcess>(args, options);

  auto dumps_of = [&](int round) {
    return cluster.complete_dumps("env_" + std::to_string(round) + "_");
  };
  INFO(c->output() << cluster.daemon().output());
  REQUIRE(wait_until([&] { return dumps_of(0) == 6; }, 30s));
  bool partitioned_in_round0 = false;
  for (const auto& name : cluster.files("env_0_")) {
    if (!ends_with(name, ".json")) continue;
    EnvDump env = load_env(scratch.file(name));
    if (env_value(env, "MASTER_ADDR") == partitioned.host_ip) partitioned_in_round0 = true;
  }
  CHECK(partitioned_in_round0);  // its workers reach the store through the veth link
  REQUIRE(partitioned.set_link(false));
  REQUIRE(wait_until([&] { return dumps_of(1) == 4; }, 20s));
  for (const auto& name : cluster.files("env_1_")) {
    if (ends_with(name, ".json"))
      CHECK(env_value(load_env(scratch.file(name)), "WORLD_SIZE") == "4");
  }
  for (auto* node : {a.get(), b.get(), c.get()}) node->signal(SIGTERM);
  for (auto* node : {a.get(), b.get()}) CHECK(node->wait(10s));
}
