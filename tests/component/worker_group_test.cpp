// WorkerGroup with a fake spawner and a fake clock: which signals reach which worker's group and
// when, how the outcome reads, and that it is reported once. Output pipes are real (pumps on the
// io_context); the children and time are not.
#include "agent/worker_group.hpp"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <csignal>
#include <functional>
#include <optional>

#include "tests/support/fake_clock.hpp"
#include "tests/support/fake_process_spawner.hpp"
#include "tests/support/io_steps.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"

using namespace cohort;
using namespace std::chrono_literals;
using Signals = std::vector<int>;

namespace {

constexpr std::chrono::seconds kGrace{30};

StreamRoute discarded() { return {false, false}; }

WorkerPlan plan(int local_rank, StreamRoute err = discarded()) {
  WorkerPlan plan;
  plan.local_rank = local_rank;
  plan.rank = 10 + local_rank;
  plan.request.executable = "/opt/train";
  plan.out = discarded();
  plan.err = err;
  return plan;
}

struct GroupTest {
  boost::asio::io_context io;
  test::FakeClock clock;
  test::FakeProcessSpawner spawner;
  std::unique_ptr<WorkerGroup> group =
      std::make_unique<WorkerGroup>(io, clock, spawner, std::chrono::milliseconds(kGrace));
  std::optional<GroupOutcome> outcome;
  int reports = 0;

  std::vector<pid_t> start(std::vector<WorkerPlan> plans) {
    group->start(std::move(plans), [this](GroupOutcome reported) {
      ++reports;
      outcome = std::move(reported);
    });
    return spawner.pids();
  }
  std::vector<pid_t> start(int workers) {
    std::vector<WorkerPlan> plans;
    for (int i = 0; i < workers; ++i) plans.push_back(plan(i));
    return start(std::move(plans));
  }
  void settle() { test::settle(io); }
  bool run_until(const std::function<bool()>& condition) {
    return test::run_io_until(io, condition);
  }
  bool reported() {
    return run_until([this] { return reports > 0; });
  }
  /// Gives a posted outcome its chance to arrive; true if none did.
  bool nothing_reported() {
    io.restart();
    io.poll();
    return reports == 0;
  }
};

}  // namespace

TEST_CASE("all workers succeed: Succeeded, and only the leftovers of each group are killed",
          "[worker_group]") {
  GroupTest t;
  std::vector<pid_t> pids = t.start(3);
  REQUIRE(pids.size() == 3);
  CHECK(t.spawner.child(pids[1]).request.executable == "/opt/train");
  for (pid_t pid : pids) t.spawner.exit(pid, ExitStatus::exited(0));
  REQUIRE(t.reported());
  CHECK(t.outcome->kind == GroupOutcome::Kind::Succeeded);
  CHECK(t.outcome->failures.empty());
  for (pid_t pid : pids) CHECK(t.spawner.group_signals(pid) == Signals{SIGKILL});
  CHECK(t.clock.armed() == 0);
}

TEST_CASE("one worker fails: the others get SIGTERM, and SIGKILL once the timeout has passed",
          "[worker_group]") {
  GroupTest t;
  std::vector<pid_t> pids = t.start(3);
  t.spawner.exit(pids[1], ExitStatus::exited(3));
  CHECK(t.spawner.group_signals(pids[0]) == Signals{SIGTERM});
  CHECK(t.spawner.group_signals(pids[2]) == Signals{SIGTERM});
  t.spawner.exit(pids[0], ExitStatus::killed_by(SIGTERM));  // obeys; pids[2] does not

  t.clock.advance(kGrace - 1ms);
  CHECK(t.spawner.group_signals(pids[2]) == Signals{SIGTERM});
  t.clock.advance(1ms);
  CHECK(t.spawner.group_signals(pids[2]) == Signals{SIGTERM, SIGKILL});
  CHECK(t.spawner.group_signals(pids[0]) == Signals{SIGTERM, SIGKILL});  // its leftovers, once
  CHECK(t.nothing_reported());  // pids[2] has not exited yet

  t.spawner.exit(pids[2], ExitStatus::killed_by(SIGKILL));
  REQUIRE(t.reported());
  CHECK(t.outcome->kind == GroupOutcome::Kind::Failed);
  REQUIRE(t.outcome->failures.size() == 1);  // the ones it stopped are not failures
  const WorkerFailure& failure = t.outcome->failures[0];
  CHECK(failure.local_rank == 1);
  CHECK(failure.rank == 11);
  CHECK(failure.pid == pids[1]);
  CHECK(failure.status == ExitStatus::exited(3));
}

TEST_CASE("workers that stop within the timeout are never sent SIGKILL by the timer",
          "[worker_group]") {
  GroupTest t;
  std::vector<pid_t> pids = t.start(2);
  t.spawner.exit(pids[0], ExitStatus::exited(1));
  t.spawner.exit(pids[1], ExitStatus::killed_by(SIGTERM));
  t.clock.advance(kGrace * 2);
  CHECK(t.spawner.group_signals(pids[1]) == Signals{SIGTERM, SIGKILL});  // SIGKILL: leftovers
  REQUIRE(t.reported());
  CHECK(t.outcome->kind == GroupOutcome::Kind::Failed);
}

TEST_CASE("stop sends the signal, SIGKILL after the grace period, and reports Stopped",
          "[worker_group]") {
  GroupTest t;
  std::vector<pid_t> pids = t.start(2);
  t.group->stop(SIGINT);
  CHECK(t.group->stopping());
  for (pid_t pid : pids) CHECK(t.spawner.group_signals(pid) == Signals{SIGINT});
  t.spawner.exit(pids[0], ExitStatus::killed_by(SIGINT));
  t.clock.advance(kGrace);
  CHECK(t.spawner.group_signals(pids[1]) == Signals{SIGINT, SIGKILL});
  t.spawner.exit(pids[1], ExitStatus::killed_by(SIGKILL));
  REQUIRE(t.reported());
  CHECK(t.outcome->kind == GroupOutcome::Kind::Stopped);
  CHECK(t.outcome->failures.empty());
}

TEST_CASE("a worker that exits with a code of its own once stopped is set apart, not a failure",
          "[worker_group]") {
  GroupTest t;
  std::vector<pid_t> pids = t.start(3);
  t.group->stop(SIGTERM);
  t.spawner.exit(pids[0], ExitStatus::killed_by(SIGTERM));  // the stop's doing
  t.spawner.exit(pids[1], ExitStatus::exited(0));
  t.spawner.exit(pids[2], ExitStatus::exited(1));  // ignored the stop, failed on its own
  REQUIRE(t.reported());
  CHECK(t.outcome->kind == GroupOutcome::Kind::Stopped);
  CHECK(t.outcome->failures.empty());
  REQUIRE(t.outcome->after_stop.size() == 1);
  CHECK(t.outcome->after_stop[0].rank == 12);
  CHECK(t.outcome->after_stop[0].status == ExitStatus::exited(1));
}

TEST_CASE("a second stop kills at once", "[worker_group]") {
  GroupTest t;
  std::vector<pid_t> pids = t.start(1);
  t.group->stop(SIGTERM);
  t.group->stop(SIGTERM);
  CHECK(t.spawner.group_signals(pids[0]) == Signals{SIGTERM, SIGKILL});
}

TEST_CASE("a worker killed by a signal is a failure with that signal", "[worker_group]") {
  GroupTest t;
  std::vector<pid_t> pids = t.start(2);
  t.spawner.exit(pids[0], ExitStatus::killed_by(SIGSEGV));
  CHECK(t.spawner.group_signals(pids[1]) == Signals{SIGTERM});
  t.spawner.exit(pids[1], ExitStatus::killed_by(SIGTERM));
  REQUIRE(t.reported());
  REQUIRE(t.outcome->failures.size() == 1);
  CHECK(t.outcome->failures[0].status == ExitStatus::killed_by(SIGSEGV));
}

TEST_CASE("forward_signal reaches running workers only", "[worker_group]") {
  GroupTest t;
  std::vector<pid_t> pids = t.start(2);
  t.spawner.exit(pids[0], ExitStatus::exited(0));
  t.group->forward_signal(SIGUSR1);
  CHECK(t.spawner.group_signals(pids[0]) == Signals{SIGKILL});
  CHECK(t.spawner.group_signals(pids[1]) == Signals{SIGUSR1});
  CHECK_FALSE(t.group->stopping());
}

TEST_CASE("the outcome is reported once, whatever comes after", "[worker_group]") {
  GroupTest t;
  std::vector<pid_t> pids = t.start(1);
  t.spawner.exit(pids[0], ExitStatus::exited(2));
  REQUIRE(t.reported());
  t.group->stop(SIGTERM);
  t.clock.advance(kGrace * 2);
  t.settle();  // let anything posted arrive
  CHECK(t.reports == 1);
}

TEST_CASE("a worker that cannot be started fails with 127 and the rest never start",
          "[worker_group]") {
  GroupTest t;
  std::vector<WorkerPlan> plans{plan(0), plan(1), plan(2)};
  plans[1].request.executable = "/nowhere/train";
  t.spawner.fail_spawns_of("/nowhere/train");
  std::vector<pid_t> pids = t.start(std::move(plans));
  REQUIRE(pids.size() == 1);  // local rank 2 was not started
  CHECK(t.spawner.group_signals(pids[0]) == Signals{SIGTERM});
  t.spawner.exit(pids[0], ExitStatus::killed_by(SIGTERM));
  REQUIRE(t.reported());
  REQUIRE(t.outcome->failures.size() == 1);
  const WorkerFailure& failure = t.outcome->failures[0];
  CHECK(failure.local_rank == 1);
  CHECK(failure.status == ExitStatus::exited(127));
  REQUIRE_FALSE(failure.stderr_tail.empty());
  CHECK_THAT(failure.stderr_tail.back(), Catch::Contains("cannot execute '/nowhere/train'"));
}

TEST_CASE("a failure carries the last lines of the worker's stderr log", "[worker_group]") {
  test::TempDir dir;
  GroupTest t;
  WorkerPlan only = plan(0, StreamRoute{true, false});
  only.log_dir = dir.path();
  std::vector<pid_t> pids = t.start({only});
  t.spawner.write_stderr(pids[0], "loading\nTraceback: boom\n");
  t.spawner.exit(pids[0], ExitStatus::exited(1));
  REQUIRE(t.reported());
  REQUIRE(t.outcome->failures.size() == 1);
  CHECK(t.outcome->failures[0].stderr_tail ==
        std::vector<std::string>{"loading", "Traceback: boom"});
}

TEST_CASE("output still held open after the exits is given up on 2 s later by the clock",
          "[worker_group]") {
  GroupTest t;
  WorkerPlan piped = plan(0, StreamRoute{false, true});
  piped.prefix = "[0]: ";
  std::vector<pid_t> pids = t.start({piped});
  int grandchild = ::dup(t.spawner.child(pids[0]).stderr_fd);  // an escaped child keeps the pipe
  REQUIRE(grandchild >= 0);
  t.spawner.exit(pids[0], ExitStatus::exited(0));
  t.settle();
  CHECK(t.reports == 0);
  t.clock.advance(2s);
  CHECK(t.reported());
  CHECK(t.outcome->kind == GroupOutcome::Kind::Succeeded);
  ::close(grandchild);
}

TEST_CASE("destroying a running group kills what still runs", "[worker_group]") {
  GroupTest t;
  std::vector<pid_t> pids = t.start(2);
  t.spawner.exit(pids[0], ExitStatus::exited(0));
  t.group.reset();
  CHECK(t.spawner.group_signals(pids[0]) == Signals{SIGKILL});
  CHECK(t.spawner.group_signals(pids[1]) == Signals{SIGKILL});
  t.spawner.exit(pids[1], ExitStatus::killed_by(SIGKILL));  // reaped later: nothing reported
  CHECK(t.nothing_reported());
}

TEST_CASE("every worker of a group runs in the group's container, killed once all have exited",
          "[worker_group][containment]") {
  GroupTest t;
  std::vector<pid_t> pids = t.start(2);
  REQUIRE(t.spawner.containers_opened() == 1);
  for (pid_t pid : pids) CHECK(t.spawner.child(pid).request.container == 1);
  t.spawner.exit(pids[0], ExitStatus::exited(0));
  CHECK(t.spawner.container_calls(1).empty());  // the other worker's daemons may be its own
  t.spawner.exit(pids[1], ExitStatus::exited(0));
  CHECK(t.spawner.container_calls(1) == std::vector<std::string>{"kill"});
  REQUIRE(t.reported());
  CHECK(t.outcome->kind == GroupOutcome::Kind::Succeeded);
  t.group.reset();
  CHECK(t.spawner.container_calls(1) == std::vector<std::string>{"kill", "close"});
}

TEST_CASE("the SIGKILL of a stop reaches the container too, at the timeout or a second stop",
          "[worker_group][containment]") {
  for (bool second_stop : {false, true}) {
    INFO("second stop: " << second_stop);
    GroupTest t;
    std::vector<pid_t> pids = t.start(1);
    t.group->stop(SIGTERM);
    CHECK(t.spawner.container_calls(1).empty());  // SIGTERM is for the workers to handle
    if (second_stop)
      t.group->stop(SIGTERM);
    else
      t.clock.advance(kGrace);
    CHECK(t.spawner.group_signals(pids[0]) == Signals{SIGTERM, SIGKILL});
    CHECK(t.spawner.container_calls(1) == std::vector<std::string>{"kill"});
    t.spawner.exit(pids[0], ExitStatus::killed_by(SIGKILL));
    REQUIRE(t.reported());
    CHECK(t.outcome->kind == GroupOutcome::Kind::Stopped);
  }
}

TEST_CASE("each round's group has a container of its own", "[worker_group][containment]") {
  GroupTest t;
  std::vector<pid_t> first = t.start(1);
  t.spawner.exit(first[0], ExitStatus::exited(1));
  REQUIRE(t.reported());
  t.group =
      std::make_unique<WorkerGroup>(t.io, t.clock, t.spawner, std::chrono::milliseconds(kGrace));
  CHECK(t.spawner.container_calls(1) == std::vector<std::string>{"kill", "close"});
  std::vector<pid_t> second = t.start(1);
  REQUIRE(second.size() == 2);
  CHECK(t.spawner.child(second[1]).request.container == 2);
  CHECK(t.spawner.container_calls(2).empty());
}
