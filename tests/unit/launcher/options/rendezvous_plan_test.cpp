#include "launcher/options/rendezvous_plan.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

namespace {

// This machine is "node7"; it has 127.0.0.1 and 10.0.0.7.
RunEnvironment test_machine() {
  RunEnvironment machine;
  machine.host_name = "node7";
  machine.is_local_host = [](const std::string& host) {
    return host == "node7" || host == "localhost" || host == "127.0.0.1" || host == "10.0.0.7";
  };
  return machine;
}

struct Planned {
  RendezvousSettings settings;
  DaemonPlan daemon;
  std::vector<std::string> problems;
};

Planned plan(const RunOptions& options, int min_nodes, int max_nodes) {
  Planned planned;
  RdzvConf conf = parse_rdzv_conf(options.rdzv_conf, planned.problems);
  plan_rendezvous_settings(options, min_nodes, max_nodes, conf, planned.settings, planned.daemon,
                           planned.problems);
  plan_rendezvous(options, conf.is_host, test_machine(), planned.settings, planned.daemon,
                  planned.problems);
  return planned;
}

RunOptions c10d(const std::string& endpoint) {
  RunOptions options;
  options.rdzv_backend = "c10d";
  options.rdzv_endpoint = endpoint;
  return options;
}

}  // namespace

TEST_CASE("one node keeps a private daemon on loopback, any port", "[unit][launcher]") {
  Planned single = plan(RunOptions{}, 1, 1);
  REQUIRE(single.problems.empty());
  CHECK(single.daemon.embed == DaemonPlan::Embed::Yes);
  CHECK(single.daemon.options.address == "127.0.0.1");
  CHECK(single.daemon.options.port == 0);
  CHECK(single.settings.host == "127.0.0.1");
  CHECK(single.settings.address == "127.0.0.1");
  RunOptions standalone;
  standalone.standalone = true;
  standalone.local_addr = "10.0.0.7";
  CHECK(plan(standalone, 1, 1).daemon.options.address == "10.0.0.7");
  standalone.nnodes = "2";
  CHECK(plan(standalone, 2, 2).problems ==
        std::vector<std::string>{"--standalone: runs on one node; drop --nnodes 2"});
}

TEST_CASE("static rendezvous: node rank 0 hosts it at --master-addr:--master-port",
          "[unit][launcher]") {
  RunOptions options;
  options.master_addr = "node1";
  options.master_port = 1234;
  Planned rank0 = plan(options, 1, 3);
  REQUIRE(rank0.problems.empty());
  CHECK(rank0.daemon.embed == DaemonPlan::Embed::Yes);
  CHECK(rank0.daemon.options.address == "node1");
  CHECK(rank0.settings.port == 1234);
  CHECK(rank0.settings.config.min_nodes == 3);  // static: every node, as torchrun
  CHECK(rank0.settings.rank_hint == 0);
  CHECK(rank0.settings.address == "node7");  // advertised: this host's name
  options.node_rank = 2;
  options.local_addr = "10.0.0.7";
  Planned rank2 = plan(options, 1, 3);
  CHECK(rank2.daemon.embed == DaemonPlan::Embed::No);
  CHECK(rank2.settings.rank_hint == 2);
  CHECK(rank2.settings.address == "10.0.0.7");
  CHECK(plan(RunOptions{}, 2, 2).settings.port == 29500);
  options.node_rank = 3;
  CHECK(plan(options, 1, 3).problems ==
        std::vector<std::string>{"--node-rank 3 must be below --nnodes 3"});
}

TEST_CASE("static rendezvous on one node: the store at an explicit --master-port, node rank 0",
          "[unit][launcher]") {
  RunOptions options;
  options.master_port = 29611;
  Planned private_port = plan(options, 1, 1);  // not typed: any free port, no clash by default
  REQUIRE(private_port.problems.empty());
  CHECK(private_port.daemon.embed == DaemonPlan::Embed::Yes);
  CHECK(private_port.daemon.options.port == 0);
  CHECK(private_port.daemon.options.store_port_min == 0);
  options.master_port_given = true;
  Planned given = plan(options, 1, 1);
  CHECK(given.daemon.options.port == 0);  // the rendezvous is the agent's own
  CHECK(given.daemon.options.store_port_min == 29611);
  CHECK(given.daemon.options.store_port_max == 29611);
  RunOptions rank0_store = options;
  rank0_store.worker_store = "rank0";
  CHECK(plan(rank0_store, 1, 1).daemon.options.store_port_min == 0);
  // torchrun would wait for a node rank 0 that never comes; Slurm's SLURM_NODEID is a hint.
  options.node_rank = 1;
  CHECK(plan(options, 1, 1).problems ==
        std::vector<std::string>{"--node-rank 1 must be below --nnodes 1"});
  options.node_rank_hint = true;
  CHECK(plan(options, 1, 1).problems.empty());
}

TEST_CASE("an endpoint on this machine: an address is bound as given, a name on every address",
          "[unit][launcher]") {
  Planned by_name = plan(c10d("node7:29411"), 2, 2);
  REQUIRE(by_name.problems.empty());
  CHECK(by_name.daemon.embed == DaemonPlan::Embed::IfFree);
  CHECK(by_name.daemon.options.address == "0.0.0.0");
  CHECK(by_name.daemon.options.port == 29411);
  CHECK(by_name.settings.host == "node7");
  CHECK_FALSE(by_name.settings.rank_hint);
  CHECK(plan(c10d("10.0.0.7:29411"), 2, 2).daemon.options.address == "10.0.0.7");
  CHECK(plan(c10d("127.0.0.1:29411"), 2, 2).daemon.options.address == "127.0.0.1");
  CHECK(plan(c10d("localhost:29411"), 2, 2).daemon.options.address == "127.0.0.1");
  Planned elsewhere = plan(c10d("192.0.2.77"), 2, 2);
  CHECK(elsewhere.daemon.embed == DaemonPlan::Embed::No);
  CHECK(elsewhere.settings.port == 29400);
}

TEST_CASE("flag --rdzv-conf is_host forces or forbids hosting", "[unit][launcher]") {
  RunOptions forced = c10d("192.0.2.77:29411");
  forced.rdzv_conf = "is_host=1";
  CHECK(plan(forced, 2, 2).daemon.embed == DaemonPlan::Embed::Yes);
  RunOptions forbidden = c10d("node7:29411");
  forbidden.rdzv_conf = "is_host=0";
  CHECK(plan(forbidden, 2, 2).daemon.embed == DaemonPlan::Embed::No);
}

TEST_CASE("what cannot name a rendezvous is refused", "[unit][launcher]") {
  CHECK(plan(c10d(""), 1, 2).problems ==
        std::vector<std::string>{"--rdzv-endpoint: required with --rdzv-backend c10d and more "
                                 "than one node (host[:port] of the rendezvous daemon)"});
  CHECK(plan(c10d("[::1"), 2, 2).problems.size() == 1);
  CHECK(
      plan(c10d("node7:0"), 2, 2).problems ==
      std::vector<std::string>{"--rdzv-endpoint: port 0 (any free port) only works for one node"});
  CHECK(plan(c10d("node7:0"), 1, 1).problems.empty());
}

TEST_CASE("the settings that hold whatever the endpoint", "[unit][launcher]") {
  RunOptions options = c10d("node1:29400");
  options.max_restarts = 3;
  options.worker_store = "rank0";
  options.store_ports = "29500-29599";
  options.rdzv_conf = "join_timeout=30,last_call_timeout=1";
  options.node_rank = 4;
  options.node_rank_hint = true;
  Planned planned = plan(options, 2, 4);
  REQUIRE(planned.problems.empty());
  CHECK(planned.settings.config.min_nodes == 2);
  CHECK(planned.settings.config.max_nodes == 4);
  CHECK(planned.settings.config.max_restarts == 3);
  CHECK(planned.settings.config.join_timeout_ms == 30000);
  CHECK(planned.settings.config.last_call_ms == 1000);
  CHECK(planned.settings.rank0_store);
  CHECK(planned.settings.rank_hint == 4);
  CHECK(planned.daemon.options.store_port_min == 29500);
  CHECK(planned.daemon.options.store_port_max == 29599);
  options.store_ports = "99999";
  CHECK(plan(options, 2, 4).problems ==
        std::vector<std::string>{
            "--store-ports: expected PORT or FIRST-LAST within 1-65535, got '99999'"});
}

TEST_CASE("fallback endpoints: in order, this machine's hosted there, a quorum for the run",
          "[unit][launcher][quorum]") {
  RunOptions options = c10d("head:29400");
  options.rdzv_fallback = "node7,10.0.0.8:29500,[::1]:7";
  Planned planned = plan(options, 2, 4);
  REQUIRE(planned.problems.empty());
  // The list every node must give alike, as the daemon compares it.
  CHECK(planned.settings.config.fallbacks == "node7:29400,10.0.0.8:29500,[::1]:7");
  REQUIRE(planned.settings.fallbacks.size() == 3);
  const auto& here = planned.settings.fallbacks[0];
  CHECK(here.host == "node7");
  CHECK(here.port == 29400);  // --rdzv-endpoint's
  CHECK(here.local);
  CHECK(here.bind_address == "0.0.0.0");
  CHECK(planned.settings.fallbacks[1].port == 29500);
  CHECK_FALSE(planned.settings.fallbacks[1].local);
  CHECK(planned.settings.fallbacks[2].host == "::1");
  CHECK(plan(c10d("head:29400"), 2, 4).settings.config.fallbacks.empty());
}

TEST_CASE("fallback endpoints that cannot be are refused, naming the flag",
          "[unit][launcher][quorum]") {
  auto problem = [](RunOptions options, const std::string& fallback) {
    options.rdzv_fallback = fallback;
    Planned planned = plan(options, 2, 4);
    return planned.problems.empty() ? std::string() : planned.problems.front();
  };
  CHECK(problem(c10d("head:29400"), "node8:0") ==
        "--rdzv-fallback: expected host[:port],... (port 1-65535), got 'node8:0' in 'node8:0'");
  CHECK(problem(c10d("head:29400"), "a,,b").find("got '' in 'a,,b'") != std::string::npos);
  CHECK(problem(c10d("head:29400"), "head") ==
        "--rdzv-fallback: head:29400 is named twice (with --rdzv-endpoint)");
  CHECK(problem(c10d("head:29400"), "a,b,c,d,e,f,g,h,i") ==
        "--rdzv-fallback: at most 8 endpoints, got 9");
  RunOptions standalone;
  standalone.standalone = true;
  CHECK(problem(standalone, "node8").rfind("--rdzv-fallback: needs --rdzv-endpoint", 0) == 0);
  CHECK(problem(RunOptions{}, "node8").rfind("--rdzv-fallback: needs --rdzv-endpoint", 0) == 0);
}
