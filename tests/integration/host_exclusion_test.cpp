// Spares and bad hosts, with real agents under --nnodes 2:2: a spare that joins while the members
// restart neither fails the job nor takes a survivor's place (NVIDIA/nvidia-resiliency-ext#348);
// the host whose workers are the root cause of two failures sits out its cooldown, the spare
// takes its place in the same restart, and every node's log, cohort status and the event log say
// so.
#include <csignal>

#include "common/event_log.hpp"
#include "tests/integration/multinode_support.hpp"

using namespace cohort::test;

namespace {

// --nnodes 2:2, one worker each; `last_call` and `shutdown` in seconds.
std::vector<std::string> exclusion_flags(const std::string& last_call = "1",
                                         const std::string& shutdown = "2") {
  return {"--nnodes",
          "2:2",
          "--nproc-per-node",
          "1",
          "--rdzv-id",
          "exclusion",
          "--max-restarts",
          "5",
          "--rdzv-conf",
          "last_call_timeout=" + last_call + ",heartbeat_timeout=2,keep_alive_interval=0.2",
          "--shutdown-timeout",
          shutdown};
}

std::string state_of(const cohort::proto::StatusReply& status, const std::string& address) {
  const cohort::proto::StatusNode* node = node_at(status, address);
  return node ? node->state : "";
}

}  // namespace

TEST_CASE("a host that is the root cause twice is excluded and a spare takes its place",
          "[integration][exclusion]") {
  Scratch scratch;
  Cluster cluster(scratch);
  std::string log = scratch.file("events.jsonl");
  cluster.start_daemon("127.0.0.1", {"--event-log", log});
  std::vector<std::string> healthy{
      "--dump-env", scratch.file("env_{TORCHELASTIC_RESTART_COUNT}_{RANK}.json"), "--hang"};
  std::string go = scratch.file("go");
  // 127.0.0.3's worker fails in every round it gets, once the test says go.
  std::vector<std::string> flags = exclusion_flags();
  auto a = cluster.node("127.0.0.2", flags, healthy);
  auto sick = cluster.node_running(
      "127.0.0.3", flags,
      {"/bin/sh", "-c", "while [ ! -e " + go + " ]; do sleep 0.05; done; exit 3"});
  REQUIRE(wait_until([&] { return cluster.complete_dumps("env_0_") >= 1; }, 20s));
  auto spare = cluster.node("127.0.0.4", flags, healthy);
  REQUIRE(wait_until(
      [&] { return state_of(daemon_status(cluster.endpoint()), "127.0.0.4") == "spare"; }, 20s));

  std::ofstream(go) << "go\n";
  REQUIRE(wait_until([&] { return cluster.complete_dumps("env_2_") >= 2; }, 30s));
  // Round 1 kept 127.0.0.3 (one failure is not enough); round 2 has the spare in its place.
  CHECK(load_env(scratch.file("env_2_0.json")).at("WORLD_SIZE") == "2");
  cohort::proto::StatusReply status = daemon_status(cluster.endpoint());
  CHECK(state_of(status, "127.0.0.3") == "excluded");
  CHECK(state_of(status, "127.0.0.4") == "member");
  CHECK(state_of(status, "127.0.0.2") == "member");
  CHECK(status.runs[0].restarts_used == 2);
  const std::string notice =
      "host 127.0.0.3 is excluded for 60 s: the root cause of 2 failures (--host-failure-limit "
      "2); a spare takes its place";
  for (auto* node : {a.get(), sick.get(), spare.get()}) {
    INFO(node->output());
    CHECK(wait_until([&] { return contains(node->output(), notice); }, 5s));
  }
  CHECK(contains(cluster.daemon().output(), notice));

  for (auto* node : {a.get(), sick.get(), spare.get()}) node->signal(SIGTERM);
  for (auto* node : {a.get(), sick.get(), spare.get()}) CHECK(node->wait(10s));
  CHECK(cluster.stop_daemon());
  std::vector<nlohmann::json> excluded;
  for (const auto& event : cohort::read_event_file(log)) {
    if (event["event"] == "host.excluded") excluded.push_back(event);
  }
  REQUIRE(excluded.size() == 1);
  CHECK(excluded[0]["host"] == "127.0.0.3");
  CHECK(excluded[0]["failures"] == 2);
  CHECK(excluded[0]["cooldown_ms"] == 60000);
  CHECK(scratch.nothing_left());
}

TEST_CASE("a spare joining while the members restart neither fails the job nor takes a place",
          "[integration][spare]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  // 127.0.0.3's workers ignore SIGTERM: they stop only at the 3 s shutdown timeout, within the
  // last call (which bounds how long a round waits for its survivors).
  std::vector<std::string> flags = exclusion_flags("8", "3");
  std::string env = scratch.file("env_{TORCHELASTIC_RESTART_COUNT}_{RANK}.json");
  // Rank 0 (127.0.0.2) fails once, when the test says go: once 127.0.0.3's worker ignores
  // SIGTERM, so that it takes the whole shutdown timeout to stop.
  std::string go = scratch.file("go"), failed = scratch.file("failed_once");
  auto a =
      cluster.node_running("127.0.0.2", flags,
                           {"/bin/sh", "-c",
                            "if [ ! -e " + failed + " ]; then touch " + failed + "; while [ ! -e " +
                                go + " ]; do sleep 0.05; done; exit 3; fi; exec " + kTestWorkerBin +
                                " --dump-env " + env + " --hang"});
  std::string ready = scratch.file("slow_ready");
  auto slow = cluster.node(
      "127.0.0.3", flags, {"--dump-env", env, "--ignore-sigterm", "--ready-file", ready, "--hang"});
  REQUIRE(wait_until([&] { return file_exists(ready); }, 20s));
  std::ofstream(go) << "go\n";
  REQUIRE(wait_until([&] { return contains(a->output(), "restarting the workers"); }, 20s));
  auto spare = cluster.node("127.0.0.4", flags, {"--dump-env", env, "--hang"});
  REQUIRE(wait_until(
      [&] { return state_of(daemon_status(cluster.endpoint()), "127.0.0.4") == "joining"; }, 5s));
  CHECK(state_of(daemon_status(cluster.endpoint()), "127.0.0.3") == "restarting");

  REQUIRE(wait_until([&] { return cluster.complete_dumps("env_1_") >= 2; }, 20s));
  cohort::proto::StatusReply status = daemon_status(cluster.endpoint());
  REQUIRE(status.runs.size() == 1);
  CHECK(status.runs[0].phase == "running");
  CHECK(status.runs[0].round == 1);
  CHECK(state_of(status, "127.0.0.2") == "member");
  CHECK(state_of(status, "127.0.0.3") == "member");
  CHECK(state_of(status, "127.0.0.4") == "spare");
  for (auto* node : {a.get(), slow.get(), spare.get()}) node->signal(SIGTERM);
  for (auto* node : {a.get(), slow.get(), spare.get()}) CHECK(node->wait(15s));
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

TEST_CASE("the flags --host-failure-limit and --host-exclusion-cooldown are checked",
          "[integration][exclusion]") {
  Scratch scratch;
  RunResult limit =
      scratch.run({"--standalone", "--host-failure-limit", "-1", "--no-python", "/bin/true"});
  CHECK(limit.status.shell_code() == 2);
  CHECK(contains(limit.err, "--host-failure-limit: expected 0 (never exclude) to 1000000"));
  RunResult cooldown =
      scratch.run({"--standalone", "--host-exclusion-cooldown", "0", "--no-python", "/bin/true"});
  CHECK(cooldown.status.shell_code() == 2);
  CHECK(contains(cooldown.err, "--host-exclusion-cooldown: expected positive seconds"));
}
