// Multi-node runs on one machine: a real cohortd and three cohort run agents acting as nodes
// 127.0.0.2-127.0.0.4, two workers each, --nnodes 2:3 (DESIGN.md §3 and the rendezvous issue).
#include <csignal>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "tests/integration/multinode_support.hpp"

using namespace cohort::test;

namespace {

const std::vector<std::string> kAddresses{"127.0.0.2", "127.0.0.3", "127.0.0.4"};

std::vector<std::string> elastic_flags(const std::string& conf = "") {
  std::string rdzv_conf = "last_call_timeout=1,heartbeat_timeout=2,keep_alive_interval=0.2";
  if (!conf.empty()) rdzv_conf += "," + conf;
  return {"--nnodes",    "2:3",     "--nproc-per-node",   "2", "--rdzv-id", "job",
          "--rdzv-conf", rdzv_conf, "--shutdown-timeout", "2"};
}

// Workers that record their env and pid per round and rank, then hang until stopped.
std::vector<std::string> hanging_worker(const Scratch& scratch) {
  return {"--dump-env", scratch.file("env_{TORCHELASTIC_RESTART_COUNT}_{RANK}.json"), "--pid-file",
          scratch.file("pid_{TORCHELASTIC_RESTART_COUNT}_{RANK}"), "--hang"};
}

std::vector<EnvDump> round_dumps(const Scratch& scratch, const Cluster& cluster, int round) {
  std::vector<EnvDump> dumps;
  for (const auto& name : cluster.files("env_" + std::to_string(round) + "_")) {
    if (ends_with(name, ".json")) dumps.push_back(load_env(scratch.file(name)));
  }
  return dumps;
}

// Every worker of the round has written its env dump (after its pid file).
bool round_running(const Cluster& cluster, int round, size_t workers) {
  return cluster.complete_dumps("env_" + std::to_string(round) + "_") >= workers;
}

// Checks that the workers of one round agree on everything torchrun's env promises.
void check_consistent(const std::vector<EnvDump>& dumps, int world_size) {
  REQUIRE(dumps.size() == static_cast<size_t>(world_size));
  std::set<int> ranks;
  for (const auto& env : dumps) {
    int rank = std::stoi(env_value(env, "RANK"));
    int group_rank = std::stoi(env_value(env, "GROUP_RANK"));
    int local_rank = std::stoi(env_value(env, "LOCAL_RANK"));
    ranks.insert(rank);
    CHECK(rank == group_rank * 2 + local_rank);
    CHECK(env_value(env, "WORLD_SIZE") == std::to_string(world_size));
    CHECK(env_value(env, "GROUP_WORLD_SIZE") == std::to_string(world_size / 2));
    CHECK(env_value(env, "LOCAL_WORLD_SIZE") == "2");
    CHECK(env_value(env, "ROLE_RANK") == env_value(env, "RANK"));
    CHECK(env_value(env, "MASTER_ADDR") == env_value(dumps[0], "MASTER_ADDR"));
    CHECK(env_value(env, "MASTER_PORT") == env_value(dumps[0], "MASTER_PORT"));
    CHECK(env_value(env, "TORCHELASTIC_RESTART_COUNT") ==
          env_value(dumps[0], "TORCHELASTIC_RESTART_COUNT"));
    CHECK(env_value(env, "TORCHELASTIC_USE_AGENT_STORE") == "True");
    CHECK(env_value(env, "TORCHELASTIC_RUN_ID") == "job");
  }
  CHECK(static_cast<int>(ranks.size()) == world_size);
  CHECK(*ranks.rbegin() == world_size - 1);
}

pid_t worker_pid(const EnvDump& env) { return static_cast<pid_t>(std::stol(env.at("__pid"))); }

std::vector<pid_t> pids_of_group(const std::vector<EnvDump>& dumps, int group_rank) {
  std::vector<pid_t> pids;
  for (const auto& env : dumps) {
    if (env_value(env, "GROUP_RANK") == std::to_string(group_rank)) pids.push_back(worker_pid(env));
  }
  return pids;
}

pid_t parent_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t after_name = text.rfind(')');
  if (after_name == std::string::npos) return -1;
  std::istringstream fields(text.substr(after_name + 2));
  std::string state;
  pid_t parent = -1;
  fields >> state >> parent;
  return parent;
}

bool all_gone(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    if (process_alive(pid)) return false;
  }
  return true;
}

struct ThreeNodes {
  Scratch scratch;
  Cluster cluster{scratch};
  std::vector<std::unique_ptr<ChildProcess>> nodes;

  explicit ThreeNodes(const std::vector<std::string>& flags = elastic_flags()) {
    cluster.start_daemon();
    for (const auto& address : kAddresses) {
      nodes.push_back(cluster.node(address, flags, hanging_worker(scratch)));
    }
    INFO(cluster.daemon().output());
    REQUIRE(wait_until([&] { return round_running(cluster, 0, 6); }, 20s));
  }
  ~ThreeNodes() {
    for (auto& node : nodes) {
      if (node) node->signal(SIGTERM);
    }
    for (auto& node : nodes) {
      if (node) node->wait(10s);
    }
  }
};

}  // namespace

TEST_CASE("three nodes agree on ranks, world size and the worker store",
          "[integration][multinode]") {
  ThreeNodes run;
  std::vector<EnvDump> dumps = round_dumps(run.scratch, run.cluster, 0);
  check_consistent(dumps, 6);
  // Node order follows the addresses: 127.0.0.2 is group rank 0.
  for (const auto& env : dumps) {
    CHECK(env_value(env, "MASTER_ADDR") == "127.0.0.1");  // the daemon hosts the store
  }
  cohort::proto::StatusReply status = daemon_status(run.cluster.endpoint());
  REQUIRE(status.runs.size() == 1);
  CHECK(status.runs[0].phase == "running");
  CHECK(status.runs[0].nodes.size() == 3);
}

TEST_CASE("a SIGKILLed agent: its workers die, the others run again with world size 4",
          "[integration][multinode]") {
  ThreeNodes run;
  std::vector<pid_t> lost_workers = pids_of_group(round_dumps(run.scratch, run.cluster, 0), 2);
  REQUIRE(lost_workers.size() == 2);
  auto killed_at = std::chrono::steady_clock::now();
  run.nodes[2]->signal(SIGKILL);
  CHECK(wait_until([&] { return all_gone(lost_workers); }, 5s));
  REQUIRE(wait_until([&] { return round_running(run.cluster, 1, 4); }, 10s));
  auto recovered_in = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - killed_at);
  WARN("recovery after SIGKILL of a node: " << recovered_in.count() << " ms");
  check_consistent(round_dumps(run.scratch, run.cluster, 1), 4);
  std::vector<pid_t> old_survivors = pids_of_group(round_dumps(run.scratch, run.cluster, 0), 0);
  CHECK(all_gone(old_survivors));  // round 0's workers were stopped, not left running
}

TEST_CASE("a SIGSTOPped agent is dropped after the heartbeat timeout and not taken back",
          "[integration][multinode]") {
  ThreeNodes run;
  run.nodes[2]->signal(SIGSTOP);
  REQUIRE(wait_until([&] { return round_running(run.cluster, 1, 4); }, 15s));
  check_consistent(round_dumps(run.scratch, run.cluster, 1), 4);
  std::vector<pid_t> stale = pids_of_group(round_dumps(run.scratch, run.cluster, 0), 2);
  run.nodes[2]->signal(SIGCONT);
  // Back, it stops its stale workers and joins as a new node: a later round of 6 includes it.
  CHECK(wait_until([&] { return all_gone(stale); }, 10s));
  REQUIRE(wait_until([&] { return round_running(run.cluster, 2, 6); }, 20s));
  check_consistent(round_dumps(run.scratch, run.cluster, 2), 6);
  for (const auto& env : round_dumps(run.scratch, run.cluster, 1)) {
    CHECK(env_value(env, "GROUP_WORLD_SIZE") == "2");  // round 1 never had it back
  }
}

TEST_CASE("a node joining a running job scales it up, a lost node rejoins",
          "[integration][multinode]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  auto a = cluster.node(kAddresses[0], elastic_flags(), hanging_worker(scratch));
  auto b = cluster.node(kAddresses[1], elastic_flags(), hanging_worker(scratch));
  REQUIRE(wait_until([&] { return round_running(cluster, 0, 4); }, 20s));
  check_consistent(round_dumps(scratch, cluster, 0), 4);
  auto c = cluster.node(kAddresses[2], elastic_flags(), hanging_worker(scratch));
  REQUIRE(wait_until([&] { return round_running(cluster, 1, 6); }, 20s));
  std::vector<EnvDump> round1 = round_dumps(scratch, cluster, 1);
  check_consistent(round1, 6);
  CHECK(pids_of_group(round1, 2).size() == 2);  // the newcomer follows the survivors
  c->signal(SIGKILL);
  c->wait(5s);
  REQUIRE(wait_until([&] { return round_running(cluster, 2, 4); }, 20s));
  auto again = cluster.node(kAddresses[2], elastic_flags(), hanging_worker(scratch));
  REQUIRE(wait_until([&] { return round_running(cluster, 3, 6); }, 20s));
  check_consistent(round_dumps(scratch, cluster, 3), 6);
  for (auto* node : {a.get(), b.get(), again.get()}) node->signal(SIGTERM);
  for (auto* node : {a.get(), b.get(), again.get()}) CHECK(node->wait(10s));
  cluster.stop_daemon();
  CHECK(scratch.nothing_left());
}

TEST_CASE("a worker failure restarts every node and counts once job-wide",
          "[integration][multinode]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  std::vector<std::string> worker = hanging_worker(scratch);
  worker.insert(worker.end(), {"--only-rank", "3", "--fail-first-n-runs", "1",
                               scratch.file("failures"), "--exit-code", "5"});
  std::vector<std::string> flags = elastic_flags();
  flags.insert(flags.end(), {"--max-restarts", "1"});
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (const auto& address : kAddresses) nodes.push_back(cluster.node(address, flags, worker));
  REQUIRE(wait_until([&] { return round_running(cluster, 1, 6); }, 20s));
  check_consistent(round_dumps(scratch, cluster, 1), 6);
  cohort::proto::StatusReply status = daemon_status(cluster.endpoint());
  REQUIRE(status.runs.size() == 1);
  CHECK(status.runs[0].restarts_used == 1);
  for (auto& node : nodes) node->signal(SIGTERM);
  for (auto& node : nodes) CHECK(node->wait(10s) == cohort::ExitStatus::exited(143));
}

TEST_CASE("with the budget spent every agent exits with the worker's status and one summary",
          "[integration][multinode]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  std::vector<std::string> worker = hanging_worker(scratch);
  worker.insert(worker.end(), {"--only-rank", "3", "--sleep-ms", "300", "--exit-code", "5",
                               "--stderr", "rank three is broken"});
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (const auto& address : kAddresses) {
    nodes.push_back(cluster.node(address, elastic_flags(), worker));
  }
  std::vector<std::string> summaries;
  for (auto& node : nodes) {
    auto status = node->wait(30s);
    INFO(node->output());
    REQUIRE(status);
    CHECK(*status == cohort::ExitStatus::exited(5));
    summaries.push_back(failure_summary(node->err()));
  }
  CHECK(contains(summaries[0], "rank      : 3 (local_rank: 1)"));
  CHECK(contains(summaries[0], "rank three is broken"));
  CHECK(summaries[0] == summaries[1]);
  CHECK(summaries[1] == summaries[2]);
  cluster.stop_daemon();
  CHECK(scratch.nothing_left());
}

TEST_CASE("cohortd killed and started again: the agents reconnect and form a new round",
          "[integration][multinode]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (size_t i = 0; i < 2; ++i) {
    nodes.push_back(cluster.node(kAddresses[i], elastic_flags(), hanging_worker(scratch)));
  }
  REQUIRE(wait_until([&] { return round_running(cluster, 0, 4); }, 20s));
  std::vector<pid_t> round0 = pids_of_group(round_dumps(scratch, cluster, 0), 0);
  cluster.daemon().signal(SIGKILL);
  cluster.daemon().wait(5s);
  CHECK_FALSE(all_gone(round0));  // the workers keep running while the daemon is away
  cluster.start_daemon();
  REQUIRE(wait_until([&] { return round_running(cluster, 1, 4); }, 20s));
  check_consistent(round_dumps(scratch, cluster, 1), 4);
  // The new daemon says it took the run over, and that no node came from another endpoint.
  std::vector<std::string> status{kCohortBin, "status", "--rdzv-endpoint", cluster.endpoint()};
  if (!cluster.token_file().empty())
    status.insert(status.end(), {"--token-file", cluster.token_file()});
  RunResult shown = run_to_end(status, ChildOptions{{}, {}, "", "/tmp", "status"}, 10s);
  INFO(shown.err);
  CHECK(contains(shown.out, "\n  resumed here after round 0 (the daemon restarted)\n"));
  for (auto& node : nodes) node->signal(SIGTERM);
  for (auto& node : nodes) CHECK(node->wait(10s));
}

namespace {

// Workers that record env and pid per round and rank, then hang until a signal makes them exit
// with `code`.
std::vector<std::string> worker_exiting_on_signal(const Scratch& scratch, int code) {
  std::vector<std::string> worker = hanging_worker(scratch);
  worker.insert(worker.end(), {"--exit-on-signal", std::to_string(code)});
  return worker;
}

// Two nodes on a running cohortd, once their round 0 runs.
std::vector<std::unique_ptr<ChildProcess>> two_nodes_running(
    Cluster& cluster, const std::vector<std::string>& flags,
    const std::vector<std::string>& worker) {
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (size_t i = 0; i < 2; ++i) nodes.push_back(cluster.node(kAddresses[i], flags, worker));
  REQUIRE(wait_until([&] { return round_running(cluster, 0, 4); }, 20s));
  return nodes;
}

// Kills cohortd, then signals the round's workers of `group_rank` (-1: all) so that they end
// while no daemon runs; returns once they are gone.
void end_workers_while_daemon_down(Cluster& cluster, const Scratch& scratch, int round,
                                   int group_rank) {
  cluster.daemon().signal(SIGKILL);
  REQUIRE(cluster.daemon().wait(5s));
  std::vector<EnvDump> dumps = round_dumps(scratch, cluster, round);
  std::vector<pid_t> ending;
  for (int group : {0, 1}) {
    if (group_rank >= 0 && group != group_rank) continue;
    for (pid_t pid : pids_of_group(dumps, group)) ending.push_back(pid);
  }
  REQUIRE(ending.size() == (group_rank < 0 ? 4u : 2u));
  for (pid_t pid : ending) ::kill(pid, SIGUSR1);
  REQUIRE(wait_until([&] { return all_gone(ending); }, 10s));
}

}  // namespace

TEST_CASE("workers that finish while cohortd is down: the restarted daemon completes the run once",
          "[integration][multinode]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  auto nodes = two_nodes_running(cluster, elastic_flags(), worker_exiting_on_signal(scratch, 0));
  end_workers_while_daemon_down(cluster, scratch, 0, -1);
  cluster.start_daemon();
  for (auto& node : nodes) {
    auto status = node->wait(20s);
    INFO(node->output());
    REQUIRE(status);
    CHECK(status->success());
  }
  CHECK(round_dumps(scratch, cluster, 1).empty());  // the job did not run again
}

TEST_CASE("a worker that fails while cohortd is down counts against the restart budget",
          "[integration][multinode]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  std::vector<std::string> flags = elastic_flags();
  flags.insert(flags.end(), {"--max-restarts", "1"});
  auto nodes = two_nodes_running(cluster, flags, worker_exiting_on_signal(scratch, 9));
  end_workers_while_daemon_down(cluster, scratch, 0, 0);
  cluster.start_daemon();
  REQUIRE(wait_until([&] { return round_running(cluster, 1, 4); }, 20s));
  cohort::proto::StatusReply status = daemon_status(cluster.endpoint());
  REQUIRE(status.runs.size() == 1);
  CHECK(status.runs[0].restarts_used == 1);  // the failure while it was down was counted
  std::vector<pid_t> round1 = pids_of_group(round_dumps(scratch, cluster, 1), 1);
  ::kill(round1.at(0), SIGUSR1);  // a second failure: the budget of 1 is spent
  for (auto& node : nodes) {
    auto exit = node->wait(20s);
    INFO(node->output());
    REQUIRE(exit);
    CHECK(*exit == cohort::ExitStatus::exited(9));
  }
  CHECK(round_dumps(scratch, cluster, 2).empty());
}

namespace {

// Kills cohortd; once every agent is retrying its connection, ends every worker of round 0;
// starts cohortd again on the same port a little later, so that more attempts failed between
// the outcome and the restart.
void end_workers_while_agents_retry(Cluster& cluster, const Scratch& scratch,
                                    const std::vector<std::unique_ptr<ChildProcess>>& nodes) {
  cluster.daemon().signal(SIGKILL);
  REQUIRE(cluster.daemon().wait(5s));
  for (const auto& node : nodes) {
    INFO(node->output());
    REQUIRE(wait_until([&] { return contains(node->output(), "reconnecting"); }, 10s));
  }
  std::this_thread::sleep_for(1s);  // the retries run, each with the hello of its time
  std::vector<pid_t> ending;
  for (int group : {0, 1}) {
    for (pid_t pid : pids_of_group(round_dumps(scratch, cluster, 0), group)) ending.push_back(pid);
  }
  REQUIRE(ending.size() == 4u);
  for (pid_t pid : ending) ::kill(pid, SIGUSR1);
  REQUIRE(wait_until([&] { return all_gone(ending); }, 10s));
  std::this_thread::sleep_for(2s);
  cluster.start_daemon();
}

}  // namespace

TEST_CASE("workers that end after the agents began reconnecting: the restarted daemon hears it",
          "[integration][multinode]") {
  for (int code : {0, 3}) {
    DYNAMIC_SECTION("the workers exit " << code) {
      Scratch scratch;
      Cluster cluster(scratch);
      cluster.start_daemon();
      auto nodes =
          two_nodes_running(cluster, elastic_flags(), worker_exiting_on_signal(scratch, code));
      end_workers_while_agents_retry(cluster, scratch, nodes);
      for (auto& node : nodes) {
        auto status = node->wait(20s);
        INFO(node->output());
        REQUIRE(status);
        CHECK(*status == cohort::ExitStatus::exited(code));
      }
      CHECK(round_dumps(scratch, cluster, 1).empty());  // the job did not run again
    }
  }
}

TEST_CASE("an agent stopped past the heartbeat timeout stops its stale workers when it resumes",
          "[integration][multinode]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  auto nodes = two_nodes_running(cluster, elastic_flags(), hanging_worker(scratch));
  std::vector<pid_t> stale;
  for (int group : {0, 1}) {
    for (pid_t pid : pids_of_group(round_dumps(scratch, cluster, 0), group)) {
      if (parent_of(pid) == nodes[1]->pid()) stale.push_back(pid);
    }
  }
  REQUIRE(stale.size() == 2);
  nodes[1]->signal(SIGSTOP);
  std::this_thread::sleep_for(3500ms);  // past heartbeat_timeout=2: the daemon drops the node
  nodes[1]->signal(SIGCONT);
  REQUIRE(wait_until([&] { return all_gone(stale); }, 10s));
  REQUIRE(wait_until([&] { return round_running(cluster, 1, 4); }, 20s));
  CHECK(contains(nodes[1]->err(), "rejoining as a new node"));
  for (auto& node : nodes) node->signal(SIGTERM);
  for (auto& node : nodes) CHECK(node->wait(10s));
}

TEST_CASE("a run that never reaches min fails every agent within the join timeout",
          "[integration][multinode]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  std::vector<std::string> flags{"--nnodes",  "3",     "--nproc-per-node", "1",
                                 "--rdzv-id", "short", "--rdzv-conf",      "join_timeout=2"};
  auto a = cluster.node(kAddresses[0], flags, {"--exit-code", "0"});
  auto b = cluster.node(kAddresses[1], flags, {"--exit-code", "0"});
  for (auto* node : {a.get(), b.get()}) {
    auto status = node->wait(20s);
    INFO(node->output());
    REQUIRE(status);
    CHECK(*status == cohort::ExitStatus::exited(3));
    CHECK(contains(node->err(), "rendezvous timed out: 2 of at least 3 nodes"));
  }
}

TEST_CASE("agents that disagree on --nnodes get a clear error", "[integration][multinode]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  std::vector<std::string> worker{"--exit-code", "0"};
  auto a = cluster.node(kAddresses[0], {"--nnodes", "2", "--rdzv-id", "mix"}, worker);
  REQUIRE(wait_until([&] { return daemon_status(cluster.endpoint()).runs.size() == 1; }, 10s));
  auto b = cluster.node(kAddresses[1], {"--nnodes", "3", "--rdzv-id", "mix"}, worker);
  auto status = b->wait(20s);
  INFO(b->output());
  REQUIRE(status);
  CHECK(*status == cohort::ExitStatus::exited(3));
  CHECK(contains(b->err(), "--nnodes 3 differs from the run's 2"));
}

TEST_CASE("static mode: --node-rank, --master-addr and --master-port", "[integration][multinode]") {
  Scratch scratch;
  int port = 0;
  {
    Cluster probe(scratch);  // any free port on 127.0.0.1, from a short-lived daemon
    probe.start_daemon();
    port = probe.port();
    probe.daemon().signal(SIGKILL);
    probe.daemon().wait(5s);
  }
  auto node = [&](int rank) {
    std::vector<std::string> args{"--nnodes",         "2",
                                  "--nproc-per-node", "2",
                                  "--node-rank",      std::to_string(rank),
                                  "--master-addr",    "127.0.0.1",
                                  "--master-port",    std::to_string(port),
                                  "--no-python",      kTestWorkerBin,
                                  "--dump-env",       scratch.file("static_{RANK}.json")};
    return scratch.start(args);
  };
  auto second = node(1);  // starts first, still gets node rank 1
  auto first = node(0);
  for (auto* agent : {first.get(), second.get()}) {
    auto status = agent->wait(30s);
    INFO(agent->output());
    REQUIRE(status);
    CHECK(status->success());
  }
  for (int rank = 0; rank < 4; ++rank) {
    EnvDump env = load_env(scratch.file("static_" + std::to_string(rank) + ".json"));
    CHECK(env_value(env, "GROUP_RANK") == std::to_string(rank / 2));
    CHECK(env_value(env, "WORLD_SIZE") == "4");
  }
}

TEST_CASE("a PyTorch Gloo job across three nodes survives the loss of one",
          "[integration][multinode][pytorch]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  std::string script = std::string(kSourceDir) + "/tests/integration/elastic_allreduce.py";
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (const auto& address : kAddresses) {
    std::vector<std::string> args{"--nnodes",
                                  "2:3",
                                  "--nproc-per-node",
                                  "2",
                                  "--rdzv-id",
                                  "gloo",
                                  "--rdzv-backend",
                                  "c10d",
                                  "--rdzv-endpoint",
                                  cluster.endpoint(),
                                  "--local-addr",
                                  address,
                                  "--rdzv-conf",
                                  "last_call_timeout=1",
                                  "--shutdown-timeout",
                                  "5",
                                  script,
                                  "100",
                                  scratch.path()};
    ChildOptions options =
        scratch.options({{"PYTHON_EXEC", kPython}, {"GLOO_SOCKET_IFNAME", "lo"}});
    options.name = "gloo_" + address;
    nodes.push_back(std::make_unique<ChildProcess>(Scratch::cohort_argv(args), options));
  }
  REQUIRE(wait_until([&] { return cluster.files("started_0_").size() == 6; }, 60s));
  nodes[2]->signal(SIGKILL);
  for (size_t i = 0; i < 2; ++i) {
    auto status = nodes[i]->wait(120s);
    INFO(nodes[i]->output());
    REQUIRE(status);
    CHECK(status->success());
  }
  std::string output = nodes[0]->out() + nodes[1]->out();
  INFO(output);
  CHECK(contains(output, "done round=1 world=4"));
  cluster.stop_daemon();
  CHECK(scratch.nothing_left());
}

TEST_CASE("without cohortd, an agent on the endpoint's host hosts the rendezvous",
          "[integration][multinode]") {
  Scratch scratch;
  int port = free_daemon_port(scratch);
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (size_t i = 0; i < 2; ++i) {
    nodes.push_back(scratch.start(
        {"--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
         "127.0.0.1:" + std::to_string(port), "--rdzv-id", "hosted", "--local-addr", kAddresses[i],
         "--no-python", kTestWorkerBin, "--dump-env", scratch.file("hosted_{RANK}.json")}));
  }
  for (auto& node : nodes) {
    auto status = node->wait(30s);
    INFO(node->output());
    REQUIRE(status);
    CHECK(status->success());
  }
  for (int rank = 0; rank < 4; ++rank) {
    EnvDump env = load_env(scratch.file("hosted_" + std::to_string(rank) + ".json"));
    CHECK(env_value(env, "WORLD_SIZE") == "4");
    CHECK(env_value(env, "MASTER_ADDR") == "127.0.0.1");
  }
  CHECK(scratch.nothing_left());
}

// A console that stops reading (a paused terminal, a pipe nobody drains) for longer than the
// heartbeat timeout: the node's workers wait to write, but its agent goes on heartbeating, so
// the round is not lost, and every line arrives, in order, once the console reads again.
TEST_CASE("a node whose console stops reading keeps its place and loses no output",
          "[integration][multinode][output]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  std::vector<std::string> flags{"--nnodes",         "2",
                                 "--nproc-per-node", "1",
                                 "--rdzv-id",        "stuck-console",
                                 "--max-restarts",   "0",
                                 "--rdzv-conf",      "heartbeat_timeout=2,keep_alive_interval=0.2"};
  auto steady = cluster.node(kAddresses[0], flags, {"--sleep-ms", "8000"});
  constexpr int kLines = 300'000;  // about 9 MB on the console: more than every buffer on the way
  std::vector<std::string> argv{"/bin/sh", "-c",
                                "{ \"$0\" \"$@\"; echo $? > " + scratch.file("stuck_rc") +
                                    "; } | { sleep 5; exec cat > " + scratch.file("stuck_out") +
                                    "; }",
                                kCohortBin, "run"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(),
              {"--rdzv-backend", "c10d", "--rdzv-endpoint", cluster.endpoint(), "--local-addr",
               kAddresses[1], "--no-python", kTestWorkerBin, "--lines", std::to_string(kLines)});
  ChildOptions options = scratch.options();
  options.name = "stuck_node";
  ChildProcess stuck(argv, options);

  auto steady_status = steady->wait(40s);
  auto stuck_status = stuck.wait(40s);
  INFO(steady->output() << stuck.output() << cluster.daemon().output());
  REQUIRE(steady_status);
  REQUIRE(stuck_status);
  CHECK(steady_status->success());
  CHECK(read_file(scratch.file("stuck_rc")) == "0\n");
  const std::regex line_pattern(R"(\[default0\]:line (\d+) of rank \d)");
  int next = 0, bad = 0;
  for (const std::string& line : split_lines(read_file(scratch.file("stuck_out")))) {
    std::smatch match;
    if (std::regex_match(line, match, line_pattern) && std::stoi(match[1]) == next) {
      ++next;
    } else {
      ++bad;
    }
  }
  CHECK(next == kLines);
  CHECK(bad == 0);
  CHECK_FALSE(contains(cluster.daemon().output(), "lost"));
  cluster.stop_daemon();
  CHECK(scratch.nothing_left());
}
