// WorkerGroup's hang detection with a fake spawner and a fake clock: the first-signal allowance,
// an output line as a sign of life, the worker silent first found hung (SIGABRT to it alone, then
// SIGKILL to its group after the abort wait), and its failure carrying the hang report; the
// NCCL flight-recorder dumps asked of each rank with a pipe, awaited before the stacks are taken.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <optional>

#include "agent/worker_group.hpp"
#include "tests/support/fake_clock.hpp"
#include "tests/support/fake_process_spawner.hpp"
#include "tests/support/io_steps.hpp"
#include "tests/support/temp_dir.hpp"

using namespace cohort;
using namespace std::chrono_literals;

namespace {

struct HangTest {
  boost::asio::io_context io;
  test::FakeClock clock;
  test::FakeProcessSpawner spawner;
  WorkerGroup group{io, clock, spawner, 30000ms, HangSettings{2s, 10s}};
  std::optional<GroupOutcome> outcome;

  std::vector<pid_t> start(int workers) {
    std::vector<WorkerPlan> plans;
    for (int i = 0; i < workers; ++i) {
      WorkerPlan plan;
      plan.local_rank = i;
      plan.rank = 10 + i;
      plan.request.executable = "/opt/train";
      plans.push_back(plan);
    }
    group.start(std::move(plans), [this](GroupOutcome reported) { outcome = std::move(reported); });
    return spawner.pids();
  }
  // The signals sent to `pid` alone (signal_process).
  std::vector<int> process_signals(pid_t pid) const {
    std::vector<int> signals;
    for (const auto& sent : spawner.signals()) {
      if (sent.target == pid && !sent.group) signals.push_back(sent.signal);
    }
    return signals;
  }
};

}  // namespace

TEST_CASE("the worker silent first is found hung at its deadline and stopped with SIGABRT",
          "[worker_group][hang]") {
  HangTest t;
  std::vector<pid_t> pids = t.start(2);
  REQUIRE(pids.size() == 2);
  CHECK(t.spawner.child(pids[0]).request.inherit_fds.size() == 1);  // the heartbeat pipe
  t.clock.advance(9s);
  t.spawner.write_stderr(pids[0], "loading data\n");  // worker 0: a sign of life at 9 s
  test::settle(t.io);
  t.clock.advance(999ms);
  CHECK(t.process_signals(pids[1]).empty());  // within the first-signal allowance
  t.clock.advance(1ms);                       // 10 s: worker 1 never gave a sign of life
  CHECK(t.process_signals(pids[1]) == std::vector<int>{SIGABRT});
  CHECK(t.process_signals(pids[0]).empty());  // one hang at a time: the others are stopped

  t.spawner.exit(pids[1], ExitStatus::killed_by(SIGABRT));
  CHECK(t.spawner.group_signals(pids[0]) == std::vector<int>{SIGTERM});
  t.spawner.exit(pids[0], ExitStatus::killed_by(SIGTERM));
  REQUIRE(test::run_io_until(t.io, [&] { return t.outcome.has_value(); }));
  REQUIRE(t.outcome->failures.size() == 1);
  const WorkerFailure& failure = t.outcome->failures[0];
  CHECK(failure.rank == 11);
  REQUIRE(failure.hang);
  CHECK(failure.hang->silent_for == 10s);
  CHECK_FALSE(failure.hang->last_signal);
  CHECK_FALSE(failure.hang->note.empty());  // no stacks printed, and a native worker
}

TEST_CASE("a line moves the deadline, a hung worker that ignores SIGABRT is killed 5 s later",
          "[worker_group][hang]") {
  HangTest t;
  std::vector<pid_t> pids = t.start(1);
  t.spawner.write_stderr(pids[0], "step 1\n");
  test::settle(t.io);
  t.clock.advance(1900ms);
  t.spawner.write_stderr(pids[0], "step 2\n");
  test::settle(t.io);
  t.clock.advance(1900ms);  // 3.8 s: 1.9 s since the last line
  CHECK(t.process_signals(pids[0]).empty());
  t.clock.advance(100ms);
  CHECK(t.process_signals(pids[0]) == std::vector<int>{SIGABRT});
  t.clock.advance(4999ms);
  CHECK(t.spawner.group_signals(pids[0]).empty());
  t.clock.advance(1ms);
  CHECK(t.spawner.group_signals(pids[0]) == std::vector<int>{SIGKILL});
  t.spawner.exit(pids[0], ExitStatus::killed_by(SIGKILL));
  REQUIRE(test::run_io_until(t.io, [&] { return t.outcome.has_value(); }));
  REQUIRE(t.outcome->failures.size() == 1);
  REQUIRE(t.outcome->failures[0].hang);
  CHECK(t.outcome->failures[0].hang->silent_for == 2s);
  CHECK(t.outcome->failures[0].hang->last_signal);
}

TEST_CASE("the group's progress: each worker's silence, last step and median step time",
          "[worker_group][hang][straggler]") {
  HangTest t;
  std::vector<pid_t> pids = t.start(2);
  for (int step = 0; step < 4; ++step) {
    t.spawner.write_heartbeat(pids[0], "step " + std::to_string(step) + "\n");
    if (step % 2 == 0) t.spawner.write_heartbeat(pids[1], "step " + std::to_string(step) + "\n");
    test::settle(t.io);
    t.clock.advance(100ms);
  }
  t.clock.advance(200ms);
  std::vector<proto::RankProgress> ranks = t.group.progress();
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0].local_rank == 0);
  CHECK(ranks[0].silent_ms == 300);
  CHECK(ranks[0].step == 3);
  CHECK(ranks[0].step_ms == 100);
  CHECK(ranks[1].silent_ms == 400);
  CHECK(ranks[1].step == 2);
  CHECK(ranks[1].step_ms == 100);  // two steps in 200 ms
  // Found hung: what it prints once stopped (its traceback) is no sign of progress; the other
  // worker's beats meanwhile are (it did not wait on the hung one).
  t.clock.advance(1600ms);  // worker 1: 2 s since its last beat
  REQUIRE(t.process_signals(pids[1]) == std::vector<int>{SIGABRT});
  t.spawner.write_stderr(pids[1], "Fatal Python error: Aborted\n");
  t.spawner.write_heartbeat(pids[0], "step 4\n");
  test::settle(t.io);
  ranks = t.group.progress();
  CHECK(ranks[1].silent_ms == 2000);
  CHECK(ranks[0].step == 4);
  CHECK(ranks[0].silent_ms == 0);
  t.spawner.exit(pids[1], ExitStatus::killed_by(SIGABRT));
  t.spawner.exit(pids[0], ExitStatus::killed_by(SIGTERM));
  REQUIRE(test::run_io_until(t.io, [&] { return t.outcome.has_value(); }));
}

namespace {

// A rank's debug-info pipe as PyTorch makes it: a FIFO its monitor thread holds open to read.
struct DumpPipe {
  std::string path;
  int reader = -1;
  explicit DumpPipe(std::string at) : path(std::move(at)) {
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(reader >= 0);
  }
  ~DumpPipe() { ::close(reader); }
  std::string asked() const {
    char buffer[16];
    ssize_t n = ::read(reader, buffer, sizeof buffer);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
  }
};

std::vector<pid_t> start_with_pipes(HangTest& t, const test::TempDir& dir, bool second_pipe) {
  std::vector<WorkerPlan> plans;
  for (int i = 0; i < 2; ++i) {
    WorkerPlan plan;
    plan.local_rank = i;
    plan.rank = 10 + i;
    plan.request.executable = "/opt/train";
    if (i == 0 || second_pipe) plan.nccl_dump_pipe = dir.file("pipe_" + std::to_string(10 + i));
    plan.nccl_dump_file = dir.file("trace_" + std::to_string(10 + i));
    plans.push_back(plan);
  }
  t.group.start(std::move(plans), [&t](GroupOutcome reported) { t.outcome = std::move(reported); });
  return t.spawner.pids();
}

}  // namespace

TEST_CASE("a hang asks each rank with a pipe for its NCCL dump and stops the worker once written",
          "[worker_group][hang]") {
  HangTest t;
  test::TempDir dir;
  DumpPipe pipe(dir.file("pipe_10"));
  std::vector<pid_t> pids = start_with_pipes(t, dir, /*second_pipe=*/false);
  t.clock.advance(10s);  // rank 10 is hung at its first-signal allowance
  CHECK(pipe.asked() == "1\n");
  CHECK(t.process_signals(pids[0]).empty());  // not yet: its dump is awaited
  t.clock.advance(1500ms);
  { std::ofstream(dir.file("trace_10")) << std::string(1000, 'x'); }
  t.clock.advance(200ms);
  { std::ofstream(dir.file("trace_10"), std::ios::app) << std::string(2433, 'y'); }
  t.clock.advance(499ms);
  CHECK(t.process_signals(pids[0]).empty());  // its size has not held for the settle time
  t.clock.advance(200ms);
  CHECK(t.process_signals(pids[0]) == std::vector<int>{SIGABRT});

  t.spawner.exit(pids[0], ExitStatus::killed_by(SIGABRT));
  t.spawner.exit(pids[1], ExitStatus::killed_by(SIGTERM));
  REQUIRE(test::run_io_until(t.io, [&] { return t.outcome.has_value(); }));
  REQUIRE(t.outcome->failures.size() == 1);
  REQUIRE(t.outcome->failures[0].hang);
  const HangReport& hang = *t.outcome->failures[0].hang;
  REQUIRE(hang.dumps.size() == 1);  // rank 11 made no pipe: not asked, not waited for
  CHECK(hang.dumps[0].rank == 10);
  CHECK(hang.dumps[0].path == dir.file("trace_10"));
  CHECK(hang.dumps[0].bytes == 3433u);
  CHECK(hang.dumps[0].complete);
}

TEST_CASE("a dump file left at a rank's path before it started is not its dump",
          "[worker_group][hang]") {
  // An earlier run's dump (or another job's, at PyTorch's default /tmp path) is there at start:
  // neither what is on disk nor the wait takes it; the rank's own, written over it, is taken.
  HangTest t;
  test::TempDir dir;
  { std::ofstream(dir.file("trace_10")) << std::string(5000, 'o'); }
  { std::ofstream(dir.file("trace_11")) << std::string(6000, 'o'); }
  DumpPipe pipe(dir.file("pipe_10"));
  std::vector<pid_t> pids = start_with_pipes(t, dir, /*second_pipe=*/false);
  CHECK(t.group.dumps_on_disk().empty());
  t.clock.advance(10s);  // rank 10 is hung: its dump is asked for
  CHECK(pipe.asked() == "1\n");
  t.clock.advance(1s);
  CHECK(t.process_signals(pids[0]).empty());  // the old file's size holds: still waiting
  { std::ofstream(dir.file("trace_10")) << std::string(3433, 'n'); }
  t.clock.advance(700ms);
  CHECK(t.process_signals(pids[0]) == std::vector<int>{SIGABRT});
  std::vector<FlightRecorderDump> on_disk = t.group.dumps_on_disk();
  REQUIRE(on_disk.size() == 1);  // rank 11's file is still the old one
  CHECK(on_disk[0].rank == 10);
  CHECK(on_disk[0].bytes == 3433u);
  t.spawner.exit(pids[0], ExitStatus::killed_by(SIGABRT));
  t.spawner.exit(pids[1], ExitStatus::killed_by(SIGTERM));
  REQUIRE(test::run_io_until(t.io, [&] { return t.outcome.has_value(); }));
  const HangReport& hang = *t.outcome->failures.at(0).hang;
  REQUIRE(hang.dumps.size() == 1);
  CHECK(hang.dumps[0].bytes == 3433u);
}

TEST_CASE("the NCCL dump wait ends at --hang-dump-timeout, and 0 does not wait",
          "[worker_group][hang]") {
  HangTest t;
  test::TempDir dir;
  DumpPipe pipe10(dir.file("pipe_10")), pipe11(dir.file("pipe_11"));
  std::vector<pid_t> pids = start_with_pipes(t, dir, /*second_pipe=*/true);
  t.clock.advance(10s);
  CHECK(pipe10.asked() == "1\n");
  CHECK(pipe11.asked() == "1\n");
  t.clock.advance(1s);
  { std::ofstream(dir.file("trace_11")) << "dump"; }  // rank 11's comes, rank 10's never
  t.clock.advance(8999ms);
  CHECK(t.process_signals(pids[0]).empty());
  t.clock.advance(1ms);  // 10 s after asking
  CHECK(t.process_signals(pids[0]) == std::vector<int>{SIGABRT});
  t.spawner.exit(pids[0], ExitStatus::killed_by(SIGABRT));
  t.spawner.exit(pids[1], ExitStatus::killed_by(SIGTERM));
  REQUIRE(test::run_io_until(t.io, [&] { return t.outcome.has_value(); }));
  const HangReport& hang = *t.outcome->failures.at(0).hang;
  REQUIRE(hang.dumps.size() == 2);
  CHECK_FALSE(hang.dumps[0].bytes);
  CHECK(hang.dumps[1].bytes == 4u);
  CHECK(hang.dumps[1].complete);
  CHECK(hang.dump_wait == 10s);

  test::FakeClock clock;
  test::FakeProcessSpawner spawner;
  HangSettings no_wait{2s, 10s};
  no_wait.dump_timeout = SteadyDuration::zero();
  WorkerGroup group{t.io, clock, spawner, 30000ms, no_wait};
  test::TempDir dir2;
  DumpPipe pipe(dir2.file("pipe_10"));
  WorkerPlan plan;
  plan.rank = 10;
  plan.request.executable = "/opt/train";
  plan.nccl_dump_pipe = pipe.path;
  plan.nccl_dump_file = dir2.file("trace_10");
  group.start({plan}, [](GroupOutcome) {});
  clock.advance(10s);
  CHECK(pipe.asked() == "1\n");  // asked all the same
  bool aborted = false;
  for (const auto& sent : spawner.signals()) aborted = aborted || sent.signal == SIGABRT;
  CHECK(aborted);  // at once
}
