// A node whose agent was started before its run ended but joins only afterwards (here: its first
// health check blocks until the test lets it go) hears how the run ended, as the members did, and
// runs no worker; an agent started after the end is a new job under the same run id and trains.
// Real cohortd and `cohort run` agents on 127.0.0.1 (multinode_support.hpp).
#include <catch2/catch.hpp>
#include <fstream>

#include "tests/integration/multinode_support.hpp"

using namespace std::chrono_literals;
using namespace cohort::test;
using cohort::ExitStatus;

namespace {

const std::vector<std::string> kElastic{"--nnodes",           "1:2", "--rdzv-id", "late",
                                        "--shutdown-timeout", "2"};

// A node of run "late" whose first health check says it has begun (`began`) and then waits
// until `go` exists: the agent is started now and joins only once the test creates `go`.
std::unique_ptr<ChildProcess> held_node(Cluster& cluster, Scratch& scratch,
                                        const std::string& address,
                                        const std::vector<std::string>& worker) {
  std::string check = "touch " + scratch.file("began") + "; while [ ! -e " + scratch.file("go") +
                      " ]; do sleep 0.05; done";
  std::vector<std::string> flags = kElastic;
  flags.insert(flags.end(), {"--health-check", check});
  return cluster.node(address, flags, worker);
}

void let_go(Scratch& scratch) { std::ofstream(scratch.file("go")).close(); }

// Until cohortd has forgotten every run (their agents have all left).
bool runs_gone(Cluster& cluster) {
  return wait_until([&] { return daemon_status(cluster.endpoint()).runs.empty(); }, 15s);
}

}  // namespace

TEST_CASE("a node started before its run was stopped hears the stop when it joins after it",
          "[integration][late]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  auto member =
      cluster.node("127.0.0.2", kElastic, {"--pid-file", scratch.file("a_{RANK}"), "--hang"});
  REQUIRE(wait_until([&] { return cluster.files("a_").size() == 1; }, 20s));
  auto late = held_node(cluster, scratch, "127.0.0.3", {"--pid-file", scratch.file("b_{RANK}")});
  REQUIRE(wait_until([&] { return file_exists(scratch.file("began")); }, 20s));

  RunResult stop =
      run_to_end({kCohortBin, "stop", "--rdzv-endpoint", cluster.endpoint(), "--rdzv-id", "late"},
                 scratch.options(), 10s);
  INFO(stop.err);
  CHECK(stop.status.success());
  auto member_status = member->wait(15s);
  REQUIRE(member_status);
  CHECK(*member_status == ExitStatus::exited(130));
  REQUIRE(runs_gone(cluster));
  // Asked once it has ended, status says so, as stop does, where it said only "no run 'late'".
  RunResult asked =
      run_to_end({kCohortBin, "status", "--rdzv-endpoint", cluster.endpoint(), "--rdzv-id", "late"},
                 scratch.options(), 10s);
  INFO(asked.err);
  CHECK(asked.status.shell_code() == 3);
  CHECK(contains(asked.err, "no run 'late' listed: it has ended ("));
  CHECK(contains(asked.err, "  run.stopped  "));
  CHECK(contains(asked.err, "; cohort status --events late shows its history)"));
  RunResult again =
      run_to_end({kCohortBin, "stop", "--rdzv-endpoint", cluster.endpoint(), "--rdzv-id", "late"},
                 scratch.options(), 10s);
  CHECK(again.status.success());
  CHECK(contains(again.out, "run late had already ended"));

  let_go(scratch);
  auto late_status = late->wait(15s);
  INFO(late->output());
  REQUIRE(late_status);
  CHECK(*late_status == ExitStatus::exited(130));
  CHECK(contains(late->output(), "the run was stopped by "));
  CHECK(contains(late->output(), "s after this node started, before it joined"));
  CHECK(cluster.files("b_").empty());                     // it ran no worker
  CHECK(daemon_status(cluster.endpoint()).runs.empty());  // nor opened a run

  SECTION(
      "an agent of the job started after the stop (cohort launch's --launched-ms-ago, the "
      "job's age, on a lost host it starts again) hears it too") {
    std::vector<std::string> flags = kElastic;
    flags.insert(flags.end(), {"--launched-ms-ago", "600000"});
    auto rejoined = cluster.node("127.0.0.4", flags, {"--pid-file", scratch.file("c_{RANK}")});
    auto rejoined_status = rejoined->wait(15s);
    INFO(rejoined->output());
    REQUIRE(rejoined_status);
    CHECK(*rejoined_status == ExitStatus::exited(130));
    CHECK(contains(rejoined->output(), "the run was stopped by "));
    CHECK(cluster.files("c_").empty());
    CHECK(daemon_status(cluster.endpoint()).runs.empty());
  }
  SECTION("an agent started after the stop is a new job under the same id, and trains") {
    auto fresh = cluster.node("127.0.0.4", kElastic, {"--pid-file", scratch.file("c_{RANK}")});
    auto fresh_status = fresh->wait(30s);
    INFO(fresh->output());
    REQUIRE(fresh_status);
    CHECK(fresh_status->success());
    CHECK(cluster.files("c_").size() == 1);
  }
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

TEST_CASE("a node started before its run completed exits 0 when it joins after it and runs nothing",
          "[integration][late]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  auto late = held_node(cluster, scratch, "127.0.0.3", {"--pid-file", scratch.file("b_{RANK}")});
  REQUIRE(wait_until([&] { return file_exists(scratch.file("began")); }, 20s));
  auto member = cluster.node("127.0.0.2", kElastic, {"--sleep-ms", "200"});
  auto member_status = member->wait(30s);
  INFO(member->output());
  REQUIRE(member_status);
  CHECK(member_status->success());
  REQUIRE(runs_gone(cluster));

  let_go(scratch);
  auto late_status = late->wait(15s);
  INFO(late->output());
  REQUIRE(late_status);
  CHECK(late_status->success());  // as the members: the run succeeded
  CHECK(contains(late->output(), "run 'late' completed "));
  CHECK(contains(late->output(), "s after this node started, before it joined"));
  CHECK(contains(late->output(),
                 "run 'late' completed while this node waited to join it: this node ran nothing"));
  CHECK(cluster.files("b_").empty());
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

// Two jobs that both leave out --rdzv-id share run "none" on one cohortd: the second one's node
// waits while the first runs, and when the first completes it must not pass for a success in
// silence (torchrun's spares end the same way, exit 0, without a word).
TEST_CASE("a node that waited while its run completed says it ran nothing and why",
          "[integration][late]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  const std::vector<std::string> two_nodes{"--nnodes", "2", "--shutdown-timeout", "2"};
  auto first = cluster.node("127.0.0.2", two_nodes,
                            {"--pid-file", scratch.file("a_{RANK}"), "--sleep-ms", "1500"});
  auto second = cluster.node("127.0.0.3", two_nodes,
                             {"--pid-file", scratch.file("a_{RANK}"), "--sleep-ms", "1500"});
  REQUIRE(wait_until([&] { return cluster.files("a_").size() == 2; }, 20s));
  auto other_job = cluster.node("127.0.0.4", two_nodes, {"--pid-file", scratch.file("b_{RANK}")});
  REQUIRE(wait_until(
      [&] {
        auto runs = daemon_status(cluster.endpoint()).runs;
        return runs.size() == 1 && runs[0].nodes.size() == 3;
      },
      10s));

  for (auto* node : {first.get(), second.get(), other_job.get()}) {
    auto status = node->wait(20s);
    INFO(node->output());
    REQUIRE(status);
    CHECK(status->success());
  }
  INFO(other_job->output());
  CHECK(contains(other_job->output(),
                 "run 'none' completed while this node waited to join it: this node ran nothing "
                 "(every job that leaves out --rdzv-id joins run 'none'"));
  CHECK_FALSE(contains(first->output(), "ran nothing"));
  CHECK(cluster.files("b_").empty());
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}
