// --rdzv-fallback: three agents without cohortd, the first hosting the rendezvous at
// --rdzv-endpoint. When that agent dies, the others move to the fallback endpoint (one of them
// hosts it) and go on in a smaller round; when it takes another node with it, the last one is no
// majority of the last round and forms none: it ends after the join timeout, saying why. And
// real network splits (netns): the majority goes on, the cut-off host of the rendezvous does not
// (and follows the majority when the network heals); a node cut off alone goes back.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/free_port.hpp"
#include "tests/integration/http_support.hpp"
#include "tests/integration/integration_support.hpp"
#include "tests/integration/netns_support.hpp"
#include "tests/integration/tmux_support.hpp"

using namespace cohort::test;

namespace {

const std::vector<std::string> kAddresses{"127.0.0.2", "127.0.0.3", "127.0.0.4"};

/// How many workers of `round` have written their environment ("env_<round>_<rank>.json").
size_t dumps_of_round(const Scratch& scratch, int round) {
  size_t count = 0;
  for (const auto& name :
       entries_starting_with(scratch.path(), "env_" + std::to_string(round) + "_")) {
    count += ends_with(name, ".json");
  }
  return count;
}

/// The rendezvous.moved events a node wrote on stderr (--event-log-handler console), in order.
std::vector<nlohmann::json> moves_in(const std::string& err) {
  std::vector<nlohmann::json> moves;
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("{", 0) != 0 || !contains(line, "\"event\":\"rendezvous.moved\"")) continue;
    moves.push_back(nlohmann::json::parse(line));
  }
  return moves;
}

/// One node of a run with --rdzv-fallback, as `cohort run`'s flags: one worker that records its
/// environment in `scratch` ("env_<round>_<rank>.json") and then does what `worker` says.
struct FallbackNode {
  std::string endpoint;
  std::string fallbacks;
  std::string run_id;
  std::string rdzv_conf;
  std::string address;
  std::vector<std::string> worker;  ///< test_worker's flags after --dump-env

  std::vector<std::string> flags(const Scratch& scratch) const {
    std::vector<std::string> flags{
        "--nnodes",           "1:3",
        "--rdzv-backend",     "c10d",
        "--rdzv-endpoint",    endpoint,
        "--rdzv-fallback",    fallbacks,
        "--rdzv-id",          run_id,
        "--rdzv-conf",        rdzv_conf,
        "--local-addr",       address,
        "--shutdown-timeout", "2",
        "--no-python",        kTestWorkerBin,
        "--dump-env",         scratch.file("env_{TORCHELASTIC_RESTART_COUNT}_{RANK}.json")};
    flags.insert(flags.end(), worker.begin(), worker.end());
    return flags;
  }
};

struct FallbackRun {
  Scratch scratch;
  std::string endpoint = "127.0.0.1:" + std::to_string(cohort::pick_free_port("127.0.0.1"));
  std::string fallback = "127.0.0.1:" + std::to_string(cohort::pick_free_port("127.0.0.1"));
  int sleep_ms;
  std::string join_timeout;
  std::vector<std::string> extra_flags;
  std::string timeouts = "last_call_timeout=0.5,heartbeat_timeout=1";
  std::vector<std::unique_ptr<ChildProcess>> nodes;

  // Three nodes whose workers record their env and then run `sleep_ms`; the first node starts
  // alone and hosts the rendezvous at the endpoint before the others come.
  FallbackRun(int sleep_ms, std::string join_timeout, std::vector<std::string> extra_flags = {},
              std::string timeouts = "last_call_timeout=0.5,heartbeat_timeout=1")
      : sleep_ms(sleep_ms),
        join_timeout(std::move(join_timeout)),
        extra_flags(std::move(extra_flags)),
        timeouts(std::move(timeouts)) {
    for (const std::string& address : kAddresses) {
      ChildProcess& node = start_node(address);
      if (nodes.size() == 1) {
        REQUIRE(wait_until([&] { return contains(node.err(), "now hosts the rendezvous"); }, 10s));
      }
    }
    REQUIRE(wait_until([&] { return dumps_of_round(0) == 3; }, 20s));
  }
  ~FallbackRun() {
    for (auto& node : nodes) node->signal(SIGTERM);
    for (auto& node : nodes) node->wait(10s);
  }

  // A node with `fallbacks` as its --rdzv-fallback (the run's when empty).
  ChildProcess& start_node(const std::string& address, const std::string& fallbacks = {}) {
    FallbackNode node{endpoint, fallbacks.empty() ? fallback : fallbacks,
                      "moving", timeouts + ",keep_alive_interval=0.2,join_timeout=" + join_timeout,
                      address,  {"--sleep-ms", std::to_string(sleep_ms)}};
    std::vector<std::string> flags = node.flags(scratch);
    flags.insert(flags.begin(), extra_flags.begin(), extra_flags.end());
    nodes.push_back(scratch.start(flags));
    return *nodes.back();
  }
  size_t dumps_of_round(int round) const { return ::dumps_of_round(scratch, round); }
  EnvDump dump(int round, int rank) const {
    return load_env(
        scratch.file("env_" + std::to_string(round) + "_" + std::to_string(rank) + ".json"));
  }
};

/// A network-split test's scene: a node in a network namespace of its own (root and iproute2
/// needed), the scratch directory, and the run's token file.
struct SplitScene {
  NetnsNode cut_off;
  Scratch scratch;
  std::string token = scratch.file("token");

  SplitScene() {
    require_prerequisite(::geteuid() == 0, "root, for network namespaces (run the tests as root)");
    require_prerequisite(cut_off.ready,
                         "network namespaces and veth pairs (ip netns, ip link: iproute2)");
    std::ofstream(token) << "split-token-" << ::getpid() << "-0123456789abcdef\n";
    ::chmod(token.c_str(), 0600);
  }
  /// "ip:port", a port free on this machine.
  static std::string endpoint_on(const std::string& ip) {
    return ip + ":" + std::to_string(cohort::pick_free_port("127.0.0.1"));
  }
  /// `cohort run`'s argv for a node: `node`'s flags (its rdzv_conf adds to short timeouts), with
  /// the token file, and workers that record their env and hang.
  std::vector<std::string> agent(FallbackNode node) const {
    node.rdzv_conf =
        "last_call_timeout=0.5,heartbeat_timeout=1,keep_alive_interval=0.2," + node.rdzv_conf;
    node.worker = {"--hang"};
    std::vector<std::string> flags = node.flags(scratch);
    flags.insert(flags.begin(),
                 {kCohortBin, "run", "--token-file", token, "--event-log-handler", "console"});
    return flags;
  }
  /// The same argv, run inside the namespace.
  std::vector<std::string> agent_cut_off(FallbackNode node) const {
    std::vector<std::string> argv{"/usr/sbin/ip", "netns", "exec", cut_off.ns};
    std::vector<std::string> flags = agent(std::move(node));
    argv.insert(argv.end(), flags.begin(), flags.end());
    return argv;
  }
};

/// A split scene whose cut-off node hosts the rendezvous: its agent in the namespace at
/// --rdzv-endpoint, the two others on this side, where the fallback is. Built once round 0 of
/// the three runs.
struct HostCutOff : SplitScene {
  static constexpr const char* kHostHttpPort = "18080";  ///< the host's pages, in its namespace
  std::string endpoint = endpoint_on(cut_off.ns_ip);
  std::string fallback = endpoint_on(cut_off.host_ip);
  std::string run_id;
  std::string join_timeout;
  std::unique_ptr<ChildProcess> host;
  std::vector<std::unique_ptr<ChildProcess>> others;

  HostCutOff(std::string run_id, std::string join_timeout)
      : run_id(std::move(run_id)), join_timeout(std::move(join_timeout)) {
    ChildOptions options = scratch.options();
    options.name = "rendezvous_host";
    std::vector<std::string> host_argv = agent_cut_off(node(cut_off.ns_ip));
    host_argv.insert(std::find(host_argv.begin(), host_argv.end(), "run") + 1,
                     {"--http-port", kHostHttpPort});  // the namespace's own 127.0.0.1
    host = std::make_unique<ChildProcess>(host_argv, options);
    REQUIRE(wait_until([&] { return contains(host->err(), "now hosts the rendezvous"); }, 10s));
    for (const std::string address : {"127.0.0.2", "127.0.0.3"}) {
      options.name = "node_" + address;
      others.push_back(std::make_unique<ChildProcess>(agent(node(address)), options));
    }
    INFO(output());
    REQUIRE(wait_until([&] { return dumps_of(0) == 3; }, 30s));
  }
  /// A node of the run on `address`.
  FallbackNode node(const std::string& address) const {
    return {endpoint, fallback, run_id, "join_timeout=" + join_timeout, address};
  }
  size_t dumps_of(int round) const { return dumps_of_round(scratch, round); }
  std::string output() const { return host->output() + others[0]->output() + others[1]->output(); }
};

}  // namespace

TEST_CASE("the agent hosting the rendezvous dies: the others move to --rdzv-fallback and go on",
          "[integration][multinode][fallback]") {
  uint16_t http_port = cohort::pick_free_port("127.0.0.1");
  FallbackRun run(/*sleep_ms=*/8000, /*join_timeout=*/"30",
                  {"--http-port", std::to_string(http_port), "--event-log-handler", "console"});
  std::string round0_port = env_value(run.dump(0, 0), "MASTER_PORT");
  // The host of the rendezvous freezes, holding its HTTP port: the others give up on it after
  // the heartbeat timeout (1 s, to notice, and 1 s more reconnecting) and move; the node that
  // hosts the fallback tries the port for 2 s, then hosts the rendezvous without its pages.
  run.nodes[0]->signal(SIGSTOP);
  for (size_t i = 1; i < 3; ++i) {
    auto status = run.nodes[i]->wait(30s);
    INFO(run.nodes[i]->output());
    REQUIRE(status);
    CHECK(status->success());  // the run completed, in a round of two
    CHECK(contains(run.nodes[i]->err(), "the rendezvous moves to " + run.fallback +
                                            " (--rdzv-fallback; the workers keep running)"));
    // The node's event log says so too.
    std::vector<nlohmann::json> moves = moves_in(run.nodes[i]->err());
    REQUIRE(moves.size() == 1);
    const nlohmann::json& event = moves[0];
    CHECK(event["kind"] == "fallback");
    CHECK(event["from"] == run.endpoint);
    CHECK(event["to"] == run.fallback);
    CHECK(contains(event["reason"].get<std::string>(),
                   "cannot reach the rendezvous at " + run.endpoint));
  }
  std::string hosted = "hosting the rendezvous on " + run.fallback + " (--rdzv-fallback)";
  CHECK(contains(run.nodes[1]->err(), hosted) != contains(run.nodes[2]->err(), hosted));  // one
  std::string without_pages = "--http-port " + std::to_string(http_port) +
                              ": cannot listen on 127.0.0.1:" + std::to_string(http_port) +
                              ": Address already in use; hosting the rendezvous without the HTTP "
                              "pages";
  CHECK(contains(run.nodes[1]->err() + run.nodes[2]->err(), without_pages));
  run.nodes[0]->signal(SIGKILL);  // the frozen host, as a node that crashed
  REQUIRE(run.nodes[0]->wait(10s));
  REQUIRE(run.dumps_of_round(1) == 2);
  for (int rank = 0; rank < 2; ++rank) {
    EnvDump env = run.dump(1, rank);
    CHECK(env_value(env, "WORLD_SIZE") == "2");
    CHECK(env_value(env, "TORCHELASTIC_RESTART_COUNT") == "1");  // the round count goes on
    CHECK(env_value(env, "MASTER_PORT") != round0_port);         // the fallback's worker store
  }
  CHECK(run.scratch.nothing_left());  // the killed agent's worker too
}

TEST_CASE(
    "an agent-hosted daemon that refuses is gone: the others move at once and form the next "
    "round without a last call",
    "[integration][multinode][fallback]") {
  // A heartbeat timeout of 30 s: without the welcome's word that the daemon lived in an agent,
  // the others would wait it out before moving. A last call of 20 s: without the word that the
  // lost host was a member of the last round, the fallback's daemon would wait for it.
  FallbackRun run(/*sleep_ms=*/60000, /*join_timeout=*/"60", {},
                  "last_call_timeout=20,heartbeat_timeout=30");
  run.nodes[0]->signal(SIGKILL);
  REQUIRE(wait_until([&] { return run.dumps_of_round(1) == 2; }, 10s));
  for (size_t i = 1; i < 3; ++i) {
    CHECK(contains(run.nodes[i]->err(), "Connection refused: the rendezvous moves to " +
                                            run.fallback + " (--rdzv-fallback"));
  }
}

TEST_CASE(
    "an agent-hosted daemon that goes silent: the others move one heartbeat interval after its "
    "heartbeat timeout and form the next round without a last call",
    "[integration][multinode][fallback]") {
  // A frozen host (a machine that lost power or its network sends no FIN, no RST) whose kernel
  // still accepts connections: the others notice after the heartbeat timeout (4 s) and give a
  // new connection there one heartbeat interval (0.2 s), not 4 s more. A last call of 20 s:
  // without the word that the silent host was a member of the last round, the fallback's daemon
  // would wait for it.
  FallbackRun run(/*sleep_ms=*/60000, /*join_timeout=*/"60", {},
                  "last_call_timeout=20,heartbeat_timeout=4");
  run.nodes[0]->signal(SIGSTOP);
  bool moved = wait_until([&] { return run.dumps_of_round(1) == 2; }, 15s);
  run.nodes[0]->signal(SIGKILL);
  REQUIRE(run.nodes[0]->wait(10s));
  REQUIRE(moved);
  for (size_t i = 1; i < 3; ++i) {
    INFO(run.nodes[i]->err());
    CHECK(contains(run.nodes[i]->err(), "the rendezvous stopped answering heartbeats"));
    std::string moved =
        "the rendezvous moves to " + run.fallback + " (--rdzv-fallback; the workers keep running)";
    CHECK(contains(run.nodes[i]->err(), "it accepted the connection but sent nothing for 0."));
    CHECK(contains(run.nodes[i]->err(), moved));
  }
  CHECK(env_value(run.dump(1, 0), "WORLD_SIZE") == "2");
}

TEST_CASE("an agent started after the run moved joins it at the fallback, not a second run",
          "[integration][multinode][fallback]") {
  FallbackRun run(/*sleep_ms=*/60000, /*join_timeout=*/"30");
  run.nodes[0]->signal(SIGKILL);
  REQUIRE(wait_until([&] { return run.dumps_of_round(1) == 2; }, 20s));
  // A node started afresh with the same flags, on the same machine as --rdzv-endpoint, where
  // nothing listens any more: it must not host a new rendezvous there.
  ChildProcess& late = run.start_node("127.0.0.5");
  INFO(late.output());
  REQUIRE(wait_until([&] { return run.dumps_of_round(2) == 3; }, 20s));  // scale-up to three
  CHECK(contains(late.err(), "run 'moving' has moved to " + run.fallback +
                                 " (--rdzv-fallback): its first rendezvous host was lost; "
                                 "joining it there"));
  CHECK_FALSE(contains(late.err(), "hosts the rendezvous"));
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(env_value(run.dump(2, rank), "WORLD_SIZE") == "3");
  }
  CHECK(run.dumps_of_round(3) == 0);
}

TEST_CASE("cohort status and stop and the HTTP pages follow a run that moved to --rdzv-fallback",
          "[integration][multinode][fallback]") {
  std::string http_port = std::to_string(cohort::pick_free_port("127.0.0.1"));
  FallbackRun run(/*sleep_ms=*/60000, /*join_timeout=*/"30", {"--http-port", http_port});
  // A node given other fallbacks would move elsewhere: it is refused, naming the flag.
  std::string elsewhere = "127.0.0.1:" + std::to_string(cohort::pick_free_port("127.0.0.1"));
  ChildProcess& other = run.start_node("127.0.0.5", elsewhere);
  auto refused = other.wait(20s);
  INFO(other.output());
  REQUIRE(refused);
  CHECK(refused->shell_code() == 3);
  CHECK(contains(other.err(),
                 "--rdzv-fallback " + elsewhere + " differs from the run's " + run.fallback));
  // A watch of the run, in a terminal, follows it when it moves.
  require_prerequisite(file_exists("/usr/bin/tmux"), "tmux (scripts/setup installs it)");
  Tmux tmux(run.scratch);
  tmux.start_watch(run.endpoint, 150, "watch", "--rdzv-id moving --rdzv-fallback " + run.fallback);
  std::string screen;
  REQUIRE(wait_until(
      [&] {
        screen = tmux.screen();
        return contains(screen, "moving              running   0");
      },
      10s));
  // The host freezes, holding its HTTP port, and is killed once the others move: the node that
  // hosts the rendezvous now serves its pages at the same port, as soon as the port is free.
  run.nodes[0]->signal(SIGSTOP);
  REQUIRE(wait_until(
      [&] { return contains(run.nodes[1]->err() + run.nodes[2]->err(), "rendezvous moves to"); },
      10s));
  run.nodes[0]->signal(SIGKILL);
  REQUIRE(wait_until([&] { return run.dumps_of_round(1) == 2; }, 20s));
  std::string pages = "/metrics and the timeline pages on http://127.0.0.1:" + http_port + "/";
  REQUIRE(
      wait_until([&] { return contains(run.nodes[1]->err() + run.nodes[2]->err(), pages); }, 5s));
  CHECK(contains(run.nodes[1]->err(), pages) != contains(run.nodes[2]->err(), pages));
  std::string metrics = http_get("http://127.0.0.1:" + http_port + "/metrics");
  CHECK(http_status(metrics) == 200);
  CHECK(contains(metrics, "cohort_run_round{run=\"moving\"} 1\n"));
  // Each says where the run came from, as its nodes named it.
  std::string resumed = "resumed here after round 0, which ran at " + run.endpoint;
  CHECK(contains(
      metrics, "cohort_run_resumed_after_round{run=\"moving\",from=\"" + run.endpoint + "\"} 0\n"));
  CHECK(contains(http_get("http://127.0.0.1:" + http_port + "/"), resumed));
  CHECK(contains(http_get("http://127.0.0.1:" + http_port + "/runs/moving"),
                 "<p id=\"resumed\">" + resumed));
  bool followed = wait_until(
      [&] {
        screen = tmux.screen();
        return contains(screen, "cohort status --watch  " + run.fallback + "  every") &&
               contains(screen, "followed the run here from " + run.endpoint) &&
               contains(screen, "moving              running   1");
      },
      20s);
  INFO(screen);
  CHECK(followed);
  auto ask = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), kCohortBin);
    return run.scratch.run_argv(argv, run.scratch.options(), 20s);
  };
  RunResult lost = ask({"status", "--rdzv-endpoint", run.endpoint, "--rdzv-id", "moving"});
  CHECK_FALSE(lost.status.success());  // nothing answers where the run began
  RunResult status = ask({"status", "--rdzv-endpoint", run.endpoint, "--rdzv-fallback",
                          run.fallback, "--rdzv-id", "moving"});
  INFO(status.err);
  CHECK(status.status.success());
  CHECK(contains(status.out, "run moving: running, round 1,"));
  CHECK(contains(status.out, "\n  " + resumed + " (--rdzv-fallback)\n"));
  RunResult events = ask({"status", "--events", "moving", "--rdzv-endpoint", run.fallback});
  INFO(events.err);
  CHECK(contains(events.out, "round.started  round 1, 2 ranks: "));
  CHECK(contains(events.out, "; " + resumed + " (--rdzv-fallback)\n"));
  RunResult brief = ask({"status", "--brief", "--rdzv-endpoint", run.endpoint, "--rdzv-fallback",
                         run.fallback, "--rdzv-id", "moving"});
  CHECK(brief.status.success());
  CHECK(contains(brief.out, "run moving: running, round 1,"));
  CHECK(contains(brief.out, "\n  2 nodes, 2 heard within the heartbeat timeout\n"));
  CHECK(contains(status.err, "run 'moving' is at " + run.fallback +
                                 " (--rdzv-fallback), not at --rdzv-endpoint " + run.endpoint));
  // A fallback where nothing listens is passed over; the stop reaches the run where it is.
  std::string nobody = "127.0.0.1:" + std::to_string(cohort::pick_free_port("127.0.0.1"));
  RunResult stop = ask({"stop", "--rdzv-endpoint", run.endpoint, "--rdzv-fallback",
                        nobody + "," + run.fallback, "--rdzv-id", "moving"});
  INFO(stop.err);
  CHECK(stop.status.success());
  for (size_t i = 1; i < 3; ++i) {
    auto exited = run.nodes[i]->wait(20s);
    REQUIRE(exited);
    CHECK(exited->shell_code() == 130);
  }
  RunResult bad = ask({"stop", "--rdzv-id", "moving", "--rdzv-fallback", "node1:99999"});
  CHECK(bad.status.shell_code() == 2);
  CHECK(contains(bad.err, "cohort stop: --rdzv-fallback: expected host[:port],..."));
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

// A network split: the host of the rendezvous (in a network namespace of its own) is cut off
// from the two other nodes. They lose it by heartbeat timeout, move to the fallback on this side
// and go on as a majority, two of three; the cut-off host's daemon, alive, loses them, stops its
// own node's workers and, one of three, forms no round: never two trainings at once.
TEST_CASE(
    "a network split: the majority goes on at the fallback, the cut-off host trains alone never",
    "[integration][multinode][fallback][netns]") {
  HostCutOff split("split", "5");
  const NetnsNode& cut_off = split.cut_off;
  ChildProcess& host = *split.host;
  auto dumps_of = [&](int round) { return split.dumps_of(round); };
  INFO(split.output());
  REQUIRE(cut_off.set_link(false));
  // The majority: a round of two at the fallback, hosted on this side.
  REQUIRE(wait_until([&] { return dumps_of(1) == 2; }, 20s));
  for (int rank = 0; rank < 2; ++rank) {
    EnvDump env = load_env(split.scratch.file("env_1_" + std::to_string(rank) + ".json"));
    CHECK(env_value(env, "WORLD_SIZE") == "2");
    CHECK(env_value(env, "MASTER_ADDR") == cut_off.host_ip);  // the fallback's worker store
  }
  // The cut-off host: its daemon lost the two others, stopped its workers, formed no round alone
  // and ended at the join timeout, naming the majority it lacked.
  auto status = host.wait(30s);
  REQUIRE(status);
  CHECK(status->shell_code() == 3);
  CHECK(contains(host.err(), "more than half of the last round's 3 nodes"));
  CHECK(dumps_of(1) == 2);
  CHECK(dumps_of(2) == 0);
  for (auto& node : split.others) node->signal(SIGTERM);
  for (auto& node : split.others) {
    auto ended = node->wait(10s);
    REQUIRE(ended);
    CHECK(ended->shell_code() == 128 + SIGTERM);
  }
  CHECK(split.scratch.nothing_left());
}

// A network split that cuts off one node, not the rendezvous's host: that node (in a network
// namespace) loses the rendezvous, moves to the fallback, which it hosts, and waits there alone,
// no majority; the two others go on in a round of two at the first endpoint. When the link comes
// back, the node that moved finds the run's other nodes still at the first endpoint, goes back,
// and the run grows to three again, long before the join timeout that would have ended it.
TEST_CASE("a node cut off alone goes back to the first endpoint when the network heals",
          "[integration][multinode][fallback][netns]") {
  SplitScene scene;
  const NetnsNode& cut_off = scene.cut_off;
  Scratch& scratch = scene.scratch;
  std::string endpoint = SplitScene::endpoint_on(cut_off.host_ip);
  std::string fallback = SplitScene::endpoint_on(cut_off.ns_ip);
  auto node = [&](const std::string& address) -> FallbackNode {
    return {endpoint, fallback, "heal", "join_timeout=60", address};
  };
  ChildOptions options = scratch.options();
  options.name = "rendezvous_host";
  ChildProcess host(scene.agent(node(cut_off.host_ip)), options);
  REQUIRE(wait_until([&] { return contains(host.err(), "now hosts the rendezvous"); }, 10s));
  options.name = "node_127.0.0.2";
  ChildProcess other(scene.agent(node("127.0.0.2")), options);
  options.name = "cut_off";
  ChildProcess moving(scene.agent_cut_off(node(cut_off.ns_ip)), options);
  auto dumps_of = [&](int round) { return dumps_of_round(scratch, round); };
  INFO(host.output() << other.output() << moving.output());
  REQUIRE(wait_until([&] { return dumps_of(0) == 3; }, 30s));
  REQUIRE(cut_off.set_link(false));
  // The two nodes that still see the rendezvous go on; the cut-off one moves, alone.
  REQUIRE(wait_until([&] { return dumps_of(1) == 2; }, 20s));
  REQUIRE(wait_until([&] { return contains(moving.err(), "hosting the rendezvous on"); }, 10s));
  REQUIRE(cut_off.set_link(true));
  REQUIRE(wait_until([&] { return dumps_of(2) == 3; }, 20s));
  CHECK(contains(moving.err(), "the rendezvous at " + endpoint +
                                   " answers again and 2 other nodes of the run are still there: "
                                   "this node goes back to it from " +
                                   fallback));
  std::vector<nlohmann::json> moves = moves_in(moving.err());  // there and back, as events
  REQUIRE(moves.size() == 2);
  CHECK(moves[0]["kind"] == "fallback");
  CHECK(moves[0]["to"] == fallback);
  CHECK(moves[1]["kind"] == "back");
  CHECK(moves[1]["from"] == fallback);
  CHECK(moves[1]["to"] == endpoint);
  CHECK(moves[1]["reason"] == "2 other nodes of the run still there");
  for (int rank = 0; rank < 3; ++rank) {
    EnvDump env = load_env(scratch.file("env_2_" + std::to_string(rank) + ".json"));
    CHECK(env_value(env, "WORLD_SIZE") == "3");
    CHECK(env_value(env, "MASTER_ADDR") == cut_off.host_ip);  // the first endpoint's store
  }
  // The daemon it hosted at the fallback still answers, and holds nothing of the run: a later
  // move there starts afresh.
  RunResult fallback_status = run_to_end(
      {kCohortBin, "status", "--rdzv-endpoint", fallback, "--token-file", scene.token, "--json"},
      ChildOptions{{}, {}, "", "/tmp", "status"}, 10s);
  CHECK(fallback_status.status.success());
  CHECK(contains(fallback_status.out, "\"runs\":[]"));
  CHECK(contains(fallback_status.out,
                 "\"moved_runs\":[{\"run_id\":\"heal\",\"to\":\"" + endpoint + "\"}]"));
  for (ChildProcess* node : {&host, &other, &moving}) node->signal(SIGTERM);
  for (ChildProcess* node : {&host, &other, &moving}) {
    auto ended = node->wait(10s);
    REQUIRE(ended);
    CHECK(ended->shell_code() == 128 + SIGTERM);
  }
  CHECK(scratch.nothing_left());
}

// The mirror of the split above: the host of the rendezvous (in a network namespace) is cut off,
// the two others move to the fallback and go on there as a majority, and the host's side, one of
// three, forms no round. When the link comes back, the host's agent finds the run in a round at
// the later endpoint, leaves its own daemon and follows it there: the run grows to three again,
// long before the join timeout that would have ended the host. A node started afresh later
// finds the run there too, though the host's idle daemon still answers at the first endpoint.
TEST_CASE("a cut-off host of the rendezvous follows the majority to the fallback when it heals",
          "[integration][multinode][fallback][netns]") {
  HostCutOff split("follow", "60");
  ChildOptions options = split.scratch.options();
  const NetnsNode& cut_off = split.cut_off;
  ChildProcess& host = *split.host;
  const std::string& endpoint = split.endpoint;
  auto dumps_of = [&](int round) { return split.dumps_of(round); };
  auto status_at_first = [&] {  // asked from inside the namespace, which still reaches it
    return run_to_end({"/usr/sbin/ip", "netns", "exec", cut_off.ns, kCohortBin, "status",
                       "--rdzv-endpoint", endpoint, "--token-file", split.token},
                      ChildOptions{{}, {}, "", "/tmp", "status"}, 10s);
  };
  INFO(split.output());
  REQUIRE(cut_off.set_link(false));
  REQUIRE(wait_until([&] { return dumps_of(1) == 2; }, 20s));  // the majority, at the fallback
  // The host's side: its daemon lost the two others and, one of three, waits for a majority.
  REQUIRE(wait_until([&] { return contains(status_at_first().out, "run follow: forming"); }, 20s));
  REQUIRE(cut_off.set_link(true));
  REQUIRE(wait_until([&] { return dumps_of(2) == 3; }, 20s));
  CHECK(contains(host.err(), "the run went on at " + split.fallback +
                                 " without this node (2 live nodes in a round there): this node "
                                 "follows it from " +
                                 endpoint + " (--rdzv-fallback)"));
  std::vector<nlohmann::json> moves = moves_in(host.err());
  REQUIRE(moves.size() == 1);
  CHECK(moves[0]["kind"] == "follow");
  CHECK(moves[0]["from"] == endpoint);
  CHECK(moves[0]["to"] == split.fallback);
  for (int rank = 0; rank < 3; ++rank) {
    EnvDump env = load_env(split.scratch.file("env_2_" + std::to_string(rank) + ".json"));
    CHECK(env_value(env, "WORLD_SIZE") == "3");
    CHECK(env_value(env, "MASTER_ADDR") == cut_off.host_ip);  // the fallback's worker store
  }
  // The daemon the host still runs at the first endpoint holds nothing of the run, and says
  // where it went.
  RunResult first_status = status_at_first();
  CHECK(first_status.status.success());
  std::string moved_away = "run follow: moved to " + split.fallback +
                           " (its nodes left this daemon for it: ask there, or give "
                           "--rdzv-fallback)\n";
  CHECK(first_status.out == moved_away);
  std::string bearer = read_file(split.token);
  bearer.pop_back();  // its newline
  std::string metrics =
      http_get(std::string("http://127.0.0.1:") + HostCutOff::kHostHttpPort + "/metrics", "GET",
               bearer, cut_off.ns);
  CHECK(http_status(metrics) == 200);
  CHECK(contains(metrics, "cohort_run_moved{run=\"follow\",to=\"" + split.fallback + "\"} 1\n"));
  // A stop sent there, without --rdzv-fallback, stops nothing and is told where the run went.
  RunResult stop_at_first =
      run_to_end({"/usr/sbin/ip", "netns", "exec", cut_off.ns, kCohortBin, "stop",
                  "--rdzv-endpoint", endpoint, "--token-file", split.token, "--rdzv-id", "follow"},
                 ChildOptions{{}, {}, "", "/tmp", "stop"}, 10s);
  CHECK(stop_at_first.status.shell_code() == 3);
  CHECK(stop_at_first.err == "cohort stop: " + endpoint + ": no run 'follow' here: it moved to " +
                                 split.fallback +
                                 " (its nodes left this daemon for it: ask there, or give "
                                 "--rdzv-fallback)\n");
  // A node lost (not the fallback's host), and one started afresh with the same flags: the
  // daemon at the first endpoint answers without the run, which is in a round at the fallback;
  // the new node joins it there instead of starting a second run at the first endpoint.
  size_t lost = contains(split.others[0]->err(), "hosting the rendezvous on") ? 1 : 0;
  split.others[lost]->signal(SIGKILL);
  REQUIRE(split.others[lost]->wait(10s));
  REQUIRE(wait_until([&] { return dumps_of(3) == 2; }, 20s));
  options.name = "late";
  ChildProcess late(split.agent(split.node("127.0.0.4")), options);
  INFO(late.output());
  REQUIRE(wait_until([&] { return dumps_of(4) == 3; }, 20s));
  CHECK(contains(late.err(), "run 'follow' has moved to " + split.fallback +
                                 " (--rdzv-fallback): the daemon at --rdzv-endpoint no longer "
                                 "has it; joining it there"));
  CHECK_FALSE(contains(late.err(), "follows it from"));  // it never formed a run at the first
  CHECK(status_at_first().out == moved_away);
  std::vector<ChildProcess*> all{&host, split.others[1 - lost].get(), &late};
  for (ChildProcess* node : all) node->signal(SIGTERM);
  for (ChildProcess* node : all) {
    auto ended = node->wait(10s);
    REQUIRE(ended);
    CHECK(ended->shell_code() == 128 + SIGTERM);
  }
  CHECK(split.scratch.nothing_left());
}

namespace {

// A peer at a later --rdzv-fallback endpoint that counts the connections it accepted (in
// `count_file`): `close` closes each at once (a host that answers without the run), `hold` keeps
// each open and says nothing (silence, as a cut network gives).
std::unique_ptr<ChildProcess> counting_peer(const Scratch& scratch, const std::string& mode,
                                            std::string& endpoint, std::string& count_file) {
  const char* script =
      "import socket, sys\n"
      "mode, port_file, count_file = sys.argv[1:]\n"
      "server = socket.socket()\n"
      "server.bind(('127.0.0.1', 0))\n"
      "server.listen(128)\n"
      "open(port_file + '.tmp', 'w').write(str(server.getsockname()[1]))\n"
      "import os; os.rename(port_file + '.tmp', port_file)\n"
      "held, count = [], 0\n"
      "while True:\n"
      "    peer, _ = server.accept()\n"
      "    count += 1\n"
      "    open(count_file, 'w').write(str(count))\n"
      "    peer.close() if mode == 'close' else held.append(peer)\n";
  std::string port_file = scratch.file(mode + "_port");
  count_file = scratch.file(mode + "_count");
  ChildOptions options = scratch.options();
  options.name = mode + "_peer";
  auto peer = std::make_unique<ChildProcess>(
      std::vector<std::string>{kPython, "-c", script, mode, port_file, count_file}, options);
  REQUIRE(wait_until([&] { return file_exists(port_file); }, 10s));
  endpoint = "127.0.0.1:" + read_file(port_file);
  return peer;
}

int connections_counted(const std::string& count_file) {
  return file_exists(count_file) ? std::atoi(read_file(count_file).c_str()) : 0;
}

}  // namespace

// A node waiting for a round asks the later fallbacks whether the run went on there. One whose
// host answers without the run (a standby daemon, a closed port) is asked 2, 4, 8, 16 intervals
// apart, so that spares and a large job's waiting agents do not each ask it every interval; one
// that stays silent (a cut network, whose healing is what the question watches for) is asked at
// every turn.
TEST_CASE("a waiting node asks a fallback that answers without the run less and less often",
          "[integration][multinode][fallback]") {
  Scratch scratch;
  std::string closing, closing_count, silent, silent_count;
  auto closer = counting_peer(scratch, "close", closing, closing_count);
  auto holder = counting_peer(scratch, "hold", silent, silent_count);
  std::string endpoint = "127.0.0.1:" + std::to_string(cohort::pick_free_port("127.0.0.1"));
  FallbackNode node{endpoint, closing + "," + silent, "waiting",
                    "keep_alive_interval=0.1,heartbeat_timeout=1,join_timeout=60", "127.0.0.1"};
  std::vector<std::string> flags = node.flags(scratch);
  *std::find(flags.begin(), flags.end(), "1:3") = "2";  // alone, it waits for a second node
  auto waiting = scratch.start(flags);
  INFO(waiting->output());
  REQUIRE(wait_until([&] { return contains(waiting->err(), "now hosts the rendezvous"); }, 10s));
  std::this_thread::sleep_for(6s);
  int closed = connections_counted(closing_count);
  int held = connections_counted(silent_count);
  INFO("asked the closing peer " << closed << " times, the silent one " << held << " times");
  // At every turn: one question each 0.2-0.3 s. Backed off: at about 0.1, 0.3, 0.7, 1.5, 3.1,
  // 4.7 s (each wait 0.75 to 1.25 times its gap: 8 at most).
  CHECK(closed >= 3);
  CHECK(closed <= 10);
  CHECK(held >= 10);
  waiting->signal(SIGTERM);
  auto ended = waiting->wait(10s);
  REQUIRE(ended);
  CHECK(ended->shell_code() == 128 + SIGTERM);
  CHECK(dumps_of_round(scratch, 0) == 0);
}
