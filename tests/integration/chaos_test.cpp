// One long-lived cohortd and, run after run, three elastic agents that are killed, signalled,
// stopped and resumed, or stopped with `cohort stop`, at random moments. The daemon must live
// through all of it; every agent must end by itself, never by a crash; nothing may be left. The
// moments come from a seed (COHORT_STOP_SEED, else a fresh one), printed on failure.
#include <catch2/catch.hpp>
#include <csignal>
#include <random>
#include <thread>

#include "tests/integration/multinode_support.hpp"

using namespace cohort::test;

namespace {

const char* const kQuickRendezvous =
    "last_call_timeout=0.3,heartbeat_timeout=2,keep_alive_interval=0.2,join_timeout=8";
const char* const kActions[] = {"SIGKILL", "SIGTERM", "SIGINT", "SIGSTOP then SIGCONT",
                                "cohort stop"};

// The acceptable ends of an agent: by the SIGKILL it was sent, or an exit code that is no crash's
// (the run's own, a rendezvous error, 128 + a stop signal).
bool clean_end(const cohort::ExitStatus& status) {
  if (status.signaled) return status.signal == SIGKILL;
  return status.code < 128 || status.code == 128 + SIGINT || status.code == 128 + SIGTERM ||
         status.code == 128 + SIGHUP;
}

}  // namespace

TEST_CASE("cohortd lives through agents killed, signalled, paused and stopped at random",
          "[integration][multinode][signals]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  unsigned seed = stop_seed();
  std::mt19937 random(seed);
  for (int trial = 0; trial < 6; ++trial) {
    std::string run_id = "chaos" + std::to_string(trial);
    std::vector<std::string> flags{"--nnodes",           "2:3",
                                   "--nproc-per-node",   "2",
                                   "--rdzv-id",          run_id,
                                   "--max-restarts",     "3",
                                   "--rdzv-conf",        kQuickRendezvous,
                                   "--shutdown-timeout", "1"};
    // Each worker sleeps 0-0.9 s, then one in four fails, the others sleep 2 s and succeed.
    std::vector<std::string> worker{
        "/bin/bash", "-c", "sleep 0.$((RANDOM % 10)); (( RANDOM % 4 == 0 )) && exit 3; sleep 2"};
    std::vector<std::unique_ptr<ChildProcess>> agents;
    for (int host = 2; host <= 4; ++host)
      agents.push_back(cluster.node_running("127.0.0." + std::to_string(host), flags, worker));
    std::string done;
    std::this_thread::sleep_for(std::chrono::milliseconds(500 + random() % 1000));
    for (int step = 0; step < 2; ++step) {
      std::this_thread::sleep_for(std::chrono::milliseconds(random() % 900));
      size_t action = random() % 5;
      ChildProcess& agent = *agents[random() % agents.size()];
      done += std::string(kActions[action]) + "; ";
      if (action == 0) agent.signal(SIGKILL);
      if (action == 1) agent.signal(SIGTERM);
      if (action == 2) agent.signal(SIGINT);
      if (action == 3) {
        agent.signal(SIGSTOP);
        std::this_thread::sleep_for(std::chrono::milliseconds(random() % 900));
        agent.signal(SIGCONT);
      }
      if (action == 4) {
        scratch.run_argv(
            {kCohortBin, "stop", "--rdzv-endpoint", cluster.endpoint(), "--rdzv-id", run_id},
            scratch.options(), 10s);
      }
    }
    INFO("COHORT_STOP_SEED=" << seed << " trial " << trial << ": " << done);
    for (auto& agent : agents) {
      auto status = agent->wait(30s);
      INFO(agent->output());
      REQUIRE(status);
      INFO("the agent ended with " << status->describe());
      CHECK(clean_end(*status));
    }
    INFO(cluster.daemon().output());
    REQUIRE(process_alive(cluster.daemon().pid()));
  }
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}
