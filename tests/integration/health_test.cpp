// The health gate with real processes: a node whose --health-check fails is kept out (cohort
// status says why) and the run goes on with the others; once its check passes it joins the next
// round; a check that runs past its timeout is killed, whatever it started; a stop during the
// first check ends the node cleanly.
#include <csignal>

#include "common/event_log.hpp"
#include "tests/integration/multinode_support.hpp"

using namespace cohort::test;

namespace {

// What the daemon tells every node of a one-node run whose node stayed unhealthy.
constexpr const char* kUnhealthyTimedOut =
    "rendezvous timed out: 0 of at least 1 nodes joined within the join timeout (2 s); 1 more "
    "node failed its health check";

// A lone node unhealthy from its first check gave up at the join timeout (2 s), saying why: by
// the agent's own rule, or told by its run's join timeout, counted from its hello a moment later.
bool gave_up_unhealthy(const std::string& err) {
  return contains(err, "this node stayed unhealthy for the join timeout (2 s)") ||
         contains(err, kUnhealthyTimedOut);
}

std::vector<std::string> health_flags(const std::string& check) {
  return {"--nnodes",
          "2:3",
          "--nproc-per-node",
          "1",
          "--rdzv-id",
          "health",
          "--rdzv-conf",
          "last_call_timeout=1,heartbeat_timeout=2,keep_alive_interval=0.2",
          "--health-check",
          check,
          "--health-check-interval",
          "0.3",
          "--shutdown-timeout",
          "2"};
}

}  // namespace

TEST_CASE("a node whose health check fails is kept out, says why, and joins once it passes",
          "[integration][health]") {
  Scratch scratch;
  Cluster cluster(scratch);
  std::string log = scratch.file("events.jsonl");
  cluster.start_daemon("127.0.0.1", {"--event-log", log});
  std::string healed = scratch.file("healed");
  std::vector<std::string> worker{
      "--dump-env", scratch.file("env_{TORCHELASTIC_RESTART_COUNT}_{RANK}.json"), "--hang"};
  auto a = cluster.node("127.0.0.2", health_flags("true"), worker);
  auto b = cluster.node("127.0.0.3", health_flags("true"), worker);
  auto sick =
      cluster.node("127.0.0.4",
                   health_flags("test -e " + healed +
                                " || { echo 'GPU 3: uncorrectable ECC errors' >&2; exit 1; }"),
                   worker);
  // Round 0 forms with the two healthy nodes; the third is shown unhealthy, with its reason.
  REQUIRE(wait_until([&] { return cluster.complete_dumps("env_0_") >= 2; }, 20s));
  cohort::proto::StatusReply status = daemon_status(cluster.endpoint());
  const cohort::proto::StatusNode* shown = node_at(status, "127.0.0.4");
  REQUIRE(shown);
  CHECK(shown->state == "unhealthy");
  CHECK(shown->reason ==
        "the health check failed with exit code 1: GPU 3: uncorrectable ECC errors");
  CHECK(load_env(scratch.file("env_0_0.json")).at("WORLD_SIZE") == "2");
  CHECK(contains(sick->output(), "GPU 3: uncorrectable ECC errors; this node does not join"));
  // Healed: it joins, and the run scales up to three nodes.
  std::ofstream(healed) << "ok\n";
  REQUIRE(wait_until([&] { return cluster.complete_dumps("env_1_") >= 3; }, 20s));
  CHECK(load_env(scratch.file("env_1_0.json")).at("WORLD_SIZE") == "3");
  status = daemon_status(cluster.endpoint());
  REQUIRE(node_at(status, "127.0.0.4"));
  CHECK(node_at(status, "127.0.0.4")->state == "member");
  for (auto* node : {a.get(), b.get(), sick.get()}) node->signal(SIGTERM);
  for (auto* node : {a.get(), b.get(), sick.get()}) CHECK(node->wait(10s));
  std::vector<std::string> names;
  for (const auto& event : cohort::read_event_file(log)) names.push_back(event["event"]);
  CHECK(std::count(names.begin(), names.end(), "node.unhealthy") == 1);
  CHECK(std::count(names.begin(), names.end(), "node.healthy") == 1);
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

TEST_CASE("a node that turns unhealthy after a restart is left out of the next round",
          "[integration][health]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  std::string checked_once = scratch.file("checked_once");
  std::vector<std::string> worker{"--dump-env",
                                  scratch.file("env_{TORCHELASTIC_RESTART_COUNT}_{RANK}.json"),
                                  "--only-rank",
                                  "0",
                                  "--fail-first-n-runs",
                                  "1",
                                  scratch.file("failures"),
                                  "--exit-code",
                                  "3",
                                  "--sleep-ms",  // every rank's dump is written before rank 0 fails
                                  "1500",
                                  "--hang"};
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (const std::string address : {"127.0.0.2", "127.0.0.3", "127.0.0.4"}) {
    // 127.0.0.4 passes its first check only: it is healthy for round 0, sick after the restart.
    std::string check = address == "127.0.0.4" ? "if [ -e " + checked_once +
                                                     " ]; then exit 4; fi; touch " + checked_once
                                               : "true";
    std::vector<std::string> flags = health_flags(check);
    flags.insert(flags.end(), {"--max-restarts", "2"});
    nodes.push_back(cluster.node(address, flags, worker));
  }
  REQUIRE(wait_until([&] { return cluster.complete_dumps("env_0_") >= 3; }, 20s));
  // Rank 0's failure restarts every node; 127.0.0.4's next check fails.
  REQUIRE(wait_until([&] { return cluster.complete_dumps("env_1_") >= 2; }, 20s));
  CHECK(load_env(scratch.file("env_1_0.json")).at("WORLD_SIZE") == "2");
  cohort::proto::StatusReply status = daemon_status(cluster.endpoint());
  const cohort::proto::StatusNode* shown = node_at(status, "127.0.0.4");
  REQUIRE(shown);
  CHECK(shown->state == "unhealthy");
  CHECK(shown->reason == "the health check failed with exit code 4");
  for (auto& node : nodes) node->signal(SIGTERM);
  for (auto& node : nodes) CHECK(node->wait(10s));
  CHECK(cluster.stop_daemon());
}

TEST_CASE("an unhealthy node stopped by SIGTERM leaves cohortd serving status",
          "[integration][health]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  auto healthy = cluster.node("127.0.0.2", health_flags("true"), {"--hang"});
  auto sick = cluster.node("127.0.0.3", health_flags("echo 'GPU 1 lost' >&2; exit 1"), {"--hang"});
  REQUIRE(wait_until(
      [&] {
        cohort::proto::StatusReply status = daemon_status(cluster.endpoint());
        const cohort::proto::StatusNode* shown = node_at(status, "127.0.0.3");
        return shown && shown->state == "unhealthy" && node_at(status, "127.0.0.2");
      },
      20s));
  sick->signal(SIGTERM);
  CHECK(sick->wait(10s));
  // cohortd used to abort on the next status request (SIGABRT, std::out_of_range).
  cohort::proto::StatusReply status = daemon_status(cluster.endpoint());
  CHECK(node_at(status, "127.0.0.3") == nullptr);
  REQUIRE(node_at(status, "127.0.0.2"));
  CHECK(process_alive(cluster.daemon().pid()));
  healthy->signal(SIGTERM);
  CHECK(healthy->wait(10s));
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

// The first check runs before the node has reached the rendezvous: a stop then has nothing to
// leave. The agent used to call its absent client and die of SIGSEGV (exit 139), on a Slurm
// scancel as much as on Ctrl-C.
TEST_CASE("Ctrl-C or SIGTERM during the first health check stops the node cleanly",
          "[integration][health]") {
  auto [signal, code] = GENERATE(std::pair{SIGINT, 130}, std::pair{SIGTERM, 143});
  Scratch scratch;
  std::string pid_file = scratch.file("check_pid");
  ChildProcess run(Scratch::cohort_argv({"--standalone", "--health-check",
                                         "echo $$ > " + pid_file + "; exec sleep 60", "--no-python",
                                         "/bin/true"}),
                   scratch.options());
  REQUIRE(wait_until([&] { return std::atoi(read_file(pid_file).c_str()) > 0; }, 20s));
  pid_t check = std::atoi(read_file(pid_file).c_str());
  run.signal(signal);
  std::optional<cohort::ExitStatus> status = run.wait(10s);
  INFO(run.output());
  REQUIRE(status);
  CHECK(status->shell_code() == code);
  CHECK(wait_until([&] { return !process_alive(check); }, 5s));
  CHECK(scratch.nothing_left());
}

TEST_CASE(
    "a health check past its timeout is killed with what it started, a node unhealthy for "
    "the join timeout gives up, bad values are named",
    "[integration][health]") {
  Scratch scratch;
  RunResult timed_out =
      scratch.run({"--standalone", "--health-check", "sleep 60 & echo started; wait",
                   "--health-check-timeout", "0.5", "--health-check-interval", "0.2", "--rdzv-conf",
                   "join_timeout=2", "--no-python", "/bin/true"},
                  {}, 30s);
  CHECK(timed_out.status.shell_code() == 3);
  CHECK(contains(timed_out.err, "the health check ran past its 0.5 s timeout: started"));
  CHECK(gave_up_unhealthy(timed_out.err));
  CHECK(scratch.nothing_left());
  RunResult zero = scratch.run({"--standalone", "--health-check", "true", "--health-check-timeout",
                                "0", "--no-python", "/bin/true"});
  CHECK(zero.status.shell_code() == 2);
  CHECK(contains(zero.err, "--health-check-timeout: expected a positive number of seconds"));
  RunResult fast = scratch.run({"--standalone", "--health-check", "true", "--health-check-interval",
                                "0.01", "--no-python", "/bin/true"});
  CHECK(fast.status.shell_code() == 2);
  CHECK(contains(fast.err, "--health-check-interval: expected at least 0.1 seconds"));
  RunResult healthy =
      scratch.run({"--standalone", "--health-check", "exit 0", "--no-python", "/bin/true"});
  CHECK(healthy.status.shell_code() == 0);
}

namespace {

// Two GPUs from the NVML test double; `state` is its state file (tests/helpers/fake_nvml.cpp).
std::map<std::string, std::string> two_fake_gpus(const std::string& state) {
  return {{"COHORT_NVML_LIBRARY", kFakeNvmlLibrary},
          {"COHORT_FAKE_NVML_BUS_IDS", "0000:07:00.0,0000:0b:00.0"},
          {"COHORT_FAKE_NVML_STATE", state}};
}

}  // namespace

TEST_CASE("a GPU still held by the previous round's worker keeps the node out until released",
          "[integration][health][gpu-health]") {
  Scratch scratch;
  std::string state = scratch.file("nvml_state");
  std::string failed = scratch.file("failed_once");
  // Round 0's worker "opens" GPU 0 (the double lists its pid) and fails; the driver keeps
  // listing the dead pid until the test clears the state, as it does while it reclaims memory.
  // ($$$$: the arguments are expanded as torchrun's string.Template does, "$$" to "$".)
  std::string worker = "if [ -e " + failed + " ]; then echo round-1-ran; exit 0; fi; touch " +
                       failed + "; echo \"process 0 $$$$\" >> " + state + "; exit 3";
  ChildOptions options = scratch.options(two_fake_gpus(state));
  ChildProcess run(Scratch::cohort_argv({"--standalone", "--max-restarts", "1",
                                         "--gpu-reclaim-timeout", "0.5", "--health-check-interval",
                                         "0.2", "--no-python", "/bin/sh", "-c", worker}),
                   options);
  REQUIRE(wait_until([&] { return contains(run.output(), "--gpu-reclaim-timeout: GPU 0"); }, 20s));
  std::string said = run.output();
  CHECK(contains(said,
                 "a process of the previous round still holds a GPU after the 0.5 s "
                 "--gpu-reclaim-timeout: GPU 0 (0000:07:00.0) held by pid "));
  CHECK(contains(said, "this node does not join a round until a check passes"));
  CHECK_FALSE(contains(said, "round-1-ran"));
  std::ofstream(state, std::ios::trunc).flush();  // released
  std::optional<cohort::ExitStatus> status = run.wait(20s);
  INFO(run.output());
  REQUIRE(status);
  CHECK(status->shell_code() == 0);
  CHECK(contains(run.output(), "the health check passed: this node joins the next round"));
  CHECK(contains(run.output(), "round-1-ran"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("a GPU gone from NVML or with uncorrectable ECC errors makes the node unhealthy",
          "[integration][health][gpu-health]") {
  Scratch scratch;
  std::string state = scratch.file("nvml_state");
  // Round 0's worker breaks the machine: GPU 1 falls off the bus, GPU 0 reports ECC errors.
  std::string worker = "printf 'bus_ids 0000:07:00.0\\necc 0 2\\n' > " + state + "; exit 3";
  RunResult sick =
      scratch.run({"--standalone", "--max-restarts", "1", "--health-check-interval", "0.2",
                   "--rdzv-conf", "join_timeout=2", "--no-python", "/bin/sh", "-c", worker},
                  two_fake_gpus(state), 30s);
  INFO(sick.err);
  CHECK(sick.status.shell_code() == 3);
  CHECK(contains(sick.err,
                 "expected 2 GPUs, NVML sees 1 of them (1 in all); GPU 0 (0000:07:00.0) has 2 "
                 "uncorrectable ECC error(s)"));
  // The run's join timeout, counted from the restart, comes before the agent's own.
  CHECK(contains(sick.err, kUnhealthyTimedOut));

  // Errors on a GPU outside CUDA_VISIBLE_DEVICES are not this run's concern; a pending row remap
  // on one of its own is.
  std::ofstream(state) << "ecc 0 5\n";
  std::map<std::string, std::string> only_gpu_1 = two_fake_gpus(state);
  only_gpu_1["CUDA_VISIBLE_DEVICES"] = "1";
  RunResult other = scratch.run({"--standalone", "--no-python", "/bin/true"}, only_gpu_1);
  CHECK(other.status.shell_code() == 0);
  std::ofstream(state) << "remap_pending 1\n";
  RunResult remap = scratch.run({"--standalone", "--rdzv-conf", "join_timeout=1",
                                 "--health-check-interval", "0.2", "--no-python", "/bin/true"},
                                only_gpu_1);
  CHECK(remap.status.shell_code() == 3);
  CHECK(contains(remap.err,
                 "GPU 1 (0000:0b:00.0) has a row remap or page retirement pending (it needs a "
                 "reset)"));
  RunResult bad =
      scratch.run({"--standalone", "--gpu-reclaim-timeout", "1e12", "--no-python", "/bin/true"});
  CHECK(bad.status.shell_code() == 2);
  CHECK(contains(bad.err, "--gpu-reclaim-timeout: expected seconds from 0 to a year"));
  CHECK(scratch.nothing_left());
}

// Each round waits for the gate's reading: it asks NVML only what it judges. ECC mode (about 2 ms
// a GPU on an H200) is `cohort doctor`'s alone.
TEST_CASE("the GPU checks ask NVML for processes, ECC errors and remaps, not ECC mode",
          "[integration][health][gpu-health]") {
  Scratch scratch;
  std::map<std::string, std::string> env = two_fake_gpus(scratch.file("nvml_state"));
  env["COHORT_FAKE_NVML_CALLS"] = scratch.file("nvml_calls");
  RunResult run = scratch.run({"--standalone", "--no-python", "/bin/true"}, env);
  INFO(run.err);
  CHECK(run.status.shell_code() == 0);
  std::vector<std::string> calls = split_lines(read_file(scratch.file("nvml_calls")));
  auto count = [&](const std::string& name) {
    return std::count(calls.begin(), calls.end(), name);
  };
  CHECK(count("nvmlDeviceGetComputeRunningProcesses_v3") == 2);
  CHECK(count("nvmlDeviceGetTotalEccErrors") == 2);
  CHECK(count("nvmlDeviceGetRemappedRows") == 2);
  CHECK(count("nvmlDeviceGetEccMode") == 0);
  CHECK(scratch.nothing_left());
}

// A driver stuck on a failed GPU: the NVML test double sleeps a minute in each query.
TEST_CASE("NVML that never answers makes the node unhealthy and does not hold up a stop",
          "[integration][health][gpu-health]") {
  Scratch scratch;
  std::map<std::string, std::string> hung = two_fake_gpus(scratch.file("nvml_state"));
  hung["COHORT_FAKE_NVML_QUERY_MS"] = "60000";
  std::vector<std::string> flags{"--standalone", "--health-check-timeout", "0.5",
                                 "--health-check-interval", "0.2"};
  std::vector<std::string> gives_up = flags;
  for (const char* word : {"--rdzv-conf", "join_timeout=2", "--no-python", "/bin/true"})
    gives_up.push_back(word);
  RunResult sick = scratch.run(gives_up, hung, 30s);
  INFO(sick.err);
  CHECK(sick.status.shell_code() == 3);
  CHECK(contains(sick.err,
                 "NVML did not answer within the 0.5 s --health-check-timeout: the driver or a "
                 "GPU is hung; this node does not join"));
  CHECK(gave_up_unhealthy(sick.err));

  std::vector<std::string> waits = flags;
  for (const char* word : {"--no-python", "/bin/true"}) waits.push_back(word);
  ChildProcess run(Scratch::cohort_argv(waits), scratch.options(hung));
  REQUIRE(wait_until([&] { return contains(run.output(), "NVML did not answer"); }, 20s));
  // Stopped as it connects to the rendezvous it hosts (it does so once the first check has
  // failed): no run was opened there, so its daemon has nothing to wait for (it used to wait for
  // a run's end, 5 s at most), and the reading's thread is left behind.
  run.signal(SIGINT);
  std::optional<cohort::ExitStatus> status = run.wait(3s);
  REQUIRE(status);
  CHECK(status->shell_code() == 130);
  CHECK(scratch.nothing_left());
}

// The workers of a round the others have left run on while the node reconnects; should its
// health checks then fail for the join timeout, it ends, and stops them as any end does: SIGTERM
// and the grace period (they were once killed outright).
TEST_CASE(
    "a node unhealthy for the join timeout after its daemon restarted stops its workers gently",
    "[integration][health]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  std::string sick = scratch.file("sick");
  std::vector<std::string> flags = health_flags("test ! -e " + sick);
  flags[1] = "1";                 // --nnodes 1
  flags[7] += ",join_timeout=3";  // --rdzv-conf
  auto node = cluster.node("127.0.0.2", flags,
                           {"--dump-env", scratch.file("env_{RANK}.json"), "--record-signals",
                            scratch.file("signals_{RANK}"), "--exit-on-signal", "0", "--hang"});
  REQUIRE(wait_until([&] { return cluster.complete_dumps("env_") == 1; }, 20s));
  std::ofstream(sick) << "GPU 0 lost\n";
  cluster.daemon().signal(SIGKILL);
  REQUIRE(cluster.daemon().wait(10s));
  cluster.start_daemon();
  auto status = node->wait(20s);
  INFO(node->output());
  REQUIRE(status);
  CHECK(*status == cohort::ExitStatus::exited(3));
  // By the agent's own rule, or told by the restarted daemon's join timeout: either way exit 3.
  CHECK((contains(node->output(), "this node stayed unhealthy for the join timeout (3 s)") ||
         contains(node->output(), "within the join timeout (3 s); 1 more node failed its health")));
  CHECK(read_file(scratch.file("signals_0")) == "15\n");
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

// A check that leaves a process behind in a session of its own (setsid): the agent, a
// subreaper, inherits it, and it ends with the agent even though no worker group ever ran.
TEST_CASE("what a failing health check left behind ends with the agent", "[integration][health]") {
  Scratch scratch;
  RunResult result = scratch.run(
      {"--standalone", "--rdzv-conf", "join_timeout=2", "--health-check",
       "setsid sleep 300 & exit 1", "--health-check-interval", "0.3", "--no-python", "/bin/true"},
      {}, 30s);
  INFO(result.out << result.err);
  CHECK(result.status == cohort::ExitStatus::exited(3));
  CHECK(gave_up_unhealthy(result.err));
  CHECK(scratch.nothing_left());
}
