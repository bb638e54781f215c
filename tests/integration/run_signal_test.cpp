// `cohort run` on one node: signals to cohort reach every worker, stubborn workers are SIGKILLed
// after --shutdown-timeout, no worker or grandchild outlives cohort, even a SIGKILLed one, and
// workers inherit none of cohort's file descriptors. Real cohort, real test_worker processes.
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <thread>

#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

const std::string kWorker = kTestWorkerBin;

std::string numbered(const Scratch& scratch, const std::string& stem, int local_rank) {
  return scratch.file(stem + "_" + std::to_string(local_rank));
}

// Waits until every worker has written its ready file (its signal handlers are then in place).
bool all_ready(const Scratch& scratch, int workers) {
  return wait_until([&] {
    for (int local_rank = 0; local_rank < workers; ++local_rank) {
      if (!file_exists(numbered(scratch, "ready", local_rank))) return false;
    }
    return true;
  });
}

std::vector<pid_t> read_pids(const Scratch& scratch, const std::string& stem, int workers) {
  std::vector<pid_t> pids;
  for (int local_rank = 0; local_rank < workers; ++local_rank) {
    pids.push_back(read_pid(numbered(scratch, stem, local_rank)));
  }
  return pids;
}

// Waits until `holds` is true of every pid.
template <typename Predicate>
bool all_become(const std::vector<pid_t>& pids, Predicate holds) {
  return wait_until([&] { return std::all_of(pids.begin(), pids.end(), holds); });
}

bool all_gone(const std::vector<pid_t>& pids) {
  return all_become(pids, [](pid_t pid) { return !process_alive(pid); });
}

bool all_stopped(const std::vector<pid_t>& pids) {
  return all_become(pids, [](pid_t pid) { return process_state(pid) == "T"; });
}

bool all_paused(const std::vector<pid_t>& pids) {
  return all_become(pids, [](pid_t pid) { return paused(pid); });
}

// Flags of a worker that records its pid and the signals it gets, says when it is ready, hangs.
std::vector<std::string> hanging_worker(const Scratch& scratch, std::vector<std::string> extra) {
  std::vector<std::string> args{"--no-python",
                                kWorker,
                                "--pid-file",
                                scratch.file("pid_${local_rank}"),
                                "--record-signals",
                                scratch.file("signals_${local_rank}"),
                                "--ready-file",
                                scratch.file("ready_${local_rank}"),
                                "--hang"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> concat(std::vector<std::string> first,
                                const std::vector<std::string>& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

}  // namespace

TEST_CASE("SIGTERM and SIGINT to cohort reach every worker, cohort exits 128 + signal",
          "[integration][run][signals]") {
  struct Case {
    int signal;
    int exit_code;
  };
  for (Case c : {Case{SIGTERM, 143}, Case{SIGINT, 130}}) {
    Scratch scratch;
    INFO("signal " << c.signal);
    auto cohort = scratch.start(concat({"--nproc-per-node", "3", "--shutdown-timeout", "20"},
                                       hanging_worker(scratch, {"--exit-on-signal", "0"})));
    REQUIRE(all_ready(scratch, 3));
    std::vector<pid_t> workers = read_pids(scratch, "pid", 3);
    cohort->signal(c.signal);
    auto status = cohort->wait(30s);
    INFO(cohort->output());
    REQUIRE(status.has_value());
    CHECK_FALSE(status->signaled);
    CHECK(status->shell_code() == c.exit_code);
    for (int local_rank = 0; local_rank < 3; ++local_rank) {
      CHECK(read_file(numbered(scratch, "signals", local_rank)) == std::to_string(c.signal) + "\n");
    }
    CHECK(all_gone(workers));
    CHECK(failure_summary(cohort->err()).empty());  // a requested stop is not a failure
    CHECK(scratch.nothing_left());
  }
}

TEST_CASE("one SIGTERM delivered twice at once (as timeout does) still lets the workers stop",
          "[integration][run][signals]") {
  Scratch scratch;
  // `timeout 60 cohort run ...` signals cohort, then its own process group, cohort included.
  // Each worker needs 1 s to save its state once told.
  auto cohort = scratch.start({"--nproc-per-node", "2", "--no-python", "sh", "-c",
                               "trap 'sleep 1; touch " + scratch.file("saved_${local_rank}") +
                                   "; exit 0' TERM; touch " + scratch.file("ready_${local_rank}") +
                                   "; while :; do sleep 0.05; done"});
  REQUIRE(all_ready(scratch, 2));
  cohort->signal(SIGTERM);
  // The second arrives once the first was taken (had it come before, the kernel would have
  // merged them): what timeout's kill of its group does when cohort is quick.
  REQUIRE(wait_until([&] { return contains(cohort->err(), "received SIGTERM"); }));
  cohort->signal(SIGTERM);
  auto status = cohort->wait(30s);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 143);
  CHECK_FALSE(contains(cohort->err(), "killing the workers now"));
  for (int local_rank = 0; local_rank < 2; ++local_rank)
    CHECK(file_exists(numbered(scratch, "saved", local_rank)));
  CHECK(scratch.nothing_left());
}

TEST_CASE("a worker that ignores SIGTERM is SIGKILLed after --shutdown-timeout",
          "[integration][run][signals]") {
  Scratch scratch;
  auto cohort = scratch.start({"--nproc-per-node", "1", "--shutdown-timeout", "1", "--no-python",
                               kWorker, "--pid-file", scratch.file("pid_0"), "--ready-file",
                               scratch.file("ready_0"), "--ignore-sigterm", "--hang"});
  REQUIRE(all_ready(scratch, 1));
  pid_t worker = read_pid(scratch.file("pid_0"));
  cohort->signal(SIGTERM);
  // Once cohort says it is stopping the workers, the worker has the SIGTERM and shrugs it off.
  REQUIRE(wait_until([&] { return contains(cohort->err(), "received SIGTERM"); }));
  CHECK(process_alive(worker));
  auto status = cohort->wait(30s);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 143);
  CHECK(contains(cohort->err(), "did not stop within the shutdown timeout"));
  CHECK_FALSE(process_alive(worker));
  CHECK(scratch.nothing_left());
}

TEST_CASE("flag --signals-to-handle SIGUSR1: forwarded to the workers, which keep running",
          "[integration][run][signals]") {
  Scratch scratch;
  auto cohort = scratch.start(concat({"--nproc-per-node", "2", "--signals-to-handle",
                                      "SIGTERM,SIGUSR1", "--shutdown-timeout", "20"},
                                     hanging_worker(scratch, {})));
  REQUIRE(all_ready(scratch, 2));
  std::vector<pid_t> workers = read_pids(scratch, "pid", 2);
  auto recorded = [&](const std::string& expected) {
    return wait_until([&] {
      for (int local_rank = 0; local_rank < 2; ++local_rank) {
        if (read_file(numbered(scratch, "signals", local_rank)) != expected) return false;
      }
      return true;
    });
  };
  cohort->signal(SIGUSR1);
  CHECK(recorded(std::to_string(SIGUSR1) + "\n"));
  CHECK_FALSE(cohort->wait(0ms).has_value());  // cohort is still running
  for (pid_t pid : workers) CHECK(process_alive(pid));
  // SIGTERM stops the run; these workers shrug it off, so a second SIGTERM kills them at once.
  cohort->signal(SIGTERM);
  CHECK(recorded(std::to_string(SIGUSR1) + "\n" + std::to_string(SIGTERM) + "\n"));
  cohort->signal(SIGTERM);
  auto status = cohort->wait(30s);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 143);
  CHECK(all_gone(workers));
  CHECK(scratch.nothing_left());
}

TEST_CASE("kill -9 of cohort takes every worker and grandchild with it",
          "[integration][run][hygiene]") {
  Scratch scratch;
  auto cohort = scratch.start({"--nproc-per-node", "2", "--no-python", kWorker, "--pid-file",
                               scratch.file("pid_${local_rank}"), "--spawn-grandchild",
                               scratch.file("grandchild_${local_rank}"), "--ready-file",
                               scratch.file("ready_${local_rank}"), "--hang"});
  REQUIRE(all_ready(scratch, 2));
  std::vector<pid_t> workers = read_pids(scratch, "pid", 2);
  std::vector<pid_t> grandchildren = read_pids(scratch, "grandchild", 2);
  for (int i = 0; i < 2; ++i) {
    INFO("local rank " << i);
    REQUIRE(process_alive(workers[i]));
    REQUIRE(process_alive(grandchildren[i]));
    CHECK(::getpgid(workers[i]) == workers[i]);        // its own process group...
    CHECK(::getpgid(grandchildren[i]) == workers[i]);  // ...which holds its children
    CHECK(::getpgid(workers[i]) != ::getpgid(cohort->pid()));
  }
  CHECK(scratch.leftovers().size() >= 5);  // agent, workers, grandchildren (and the keeper)
  cohort->signal(SIGKILL);
  REQUIRE(cohort->wait(10s).has_value());
  bool workers_gone = all_gone(workers), grandchildren_gone = all_gone(grandchildren);
  INFO(describe_processes(workers) << describe_processes(grandchildren));
  CHECK(workers_gone);
  CHECK(grandchildren_gone);
  CHECK(scratch.nothing_left());
}

namespace {

std::vector<std::string> split_nul(const std::string& block) {
  std::vector<std::string> entries;
  size_t start = 0;
  for (size_t end; (end = block.find('\0', start)) != std::string::npos; start = end + 1)
    entries.push_back(block.substr(start, end - start));
  return entries;
}

}  // namespace

TEST_CASE("workers inherit no file descriptor of cohort beyond 0 1 2 (and the heartbeat pipe)",
          "[integration][run][hygiene]") {
  Scratch scratch;
  auto cohort = scratch.start(
      concat({"--standalone", "--nproc-per-node", "2", "--tee", "1", "--shutdown-timeout", "20"},
             hanging_worker(scratch, {"--exit-on-signal", "0"})));
  REQUIRE(all_ready(scratch, 2));
  // Listening and store sockets (--standalone), log files (--tee), pipes: none may leak. The one
  // exception is the worker's heartbeat pipe, named by COHORT_HEARTBEAT_FD.
  for (pid_t worker : read_pids(scratch, "pid", 2)) {
    std::string dir = "/proc/" + std::to_string(worker) + "/fd";
    std::string environ_block = read_file("/proc/" + std::to_string(worker) + "/environ");
    std::string heartbeat;
    for (const std::string& entry : split_nul(environ_block)) {
      if (entry.rfind("COHORT_HEARTBEAT_FD=", 0) == 0) heartbeat = entry.substr(20);
    }
    CHECK_FALSE(heartbeat.empty());
    std::string extra;
    for (const std::string& fd : entries_starting_with(dir, "")) {
      if (fd == "." || fd == ".." || fd == "0" || fd == "1" || fd == "2" || fd == heartbeat)
        continue;
      char target[256] = {};
      ssize_t length = ::readlink((dir + "/" + fd).c_str(), target, sizeof target - 1);
      extra += " " + fd + "->" + std::string(target, length > 0 ? static_cast<size_t>(length) : 0);
    }
    INFO("worker " << worker);
    CHECK(extra == "");
  }
  cohort->signal(SIGTERM);
  auto status = cohort->wait(30s);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 143);
  CHECK(scratch.nothing_left());
}

TEST_CASE("a normal run leaves no process behind", "[integration][run][hygiene]") {
  Scratch scratch;
  RunResult result = scratch.run({"--nproc-per-node", "2", "--no-python", kWorker, "--pid-file",
                                  scratch.file("pid_${local_rank}"), "--spawn-grandchild",
                                  scratch.file("grandchild_${local_rank}")});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  CHECK(all_gone(read_pids(scratch, "pid", 2)));
  CHECK(all_gone(read_pids(scratch, "grandchild", 2)));  // left behind by the workers
  CHECK(scratch.nothing_left());
}

namespace {

// The threads of `pid` other than its main one that do not block `signal` (from each thread's
// SigBlk line in /proc): a process-directed signal may go to any of them.
std::vector<std::string> helper_threads_open_to(pid_t pid, int signal) {
  std::vector<std::string> open;
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::string tid = task.path().filename();
    if (tid == std::to_string(pid)) continue;
    if (!in_signal_mask(task.path() / "status", "SigBlk", signal)) open.push_back(tid);
  }
  return open;
}

}  // namespace

// Signals are taken on the main thread, where the signal_set lives; a helper thread open to them
// (asio's resolver thread was) could take a SIGTERM sent while the process exits, once the
// signal_set is gone, and the process would die by it instead of exiting with its code.
TEST_CASE("only cohort's and cohortd's main threads take signals: every helper thread blocks them",
          "[integration][run][signals]") {
  Scratch scratch;
  std::string store;
  auto daemon = scratch.start_tcpstore_daemon(store, {}, {"--threads", "2"});
  auto cohort = scratch.start(concat({"--nproc-per-node", "1", "-v"}, hanging_worker(scratch, {})));
  REQUIRE(all_ready(scratch, 1));
  for (pid_t pid : {cohort->pid(), daemon->pid()}) {
    INFO("pid " << pid);
    CHECK(helper_threads_open_to(pid, SIGKILL).size() >= 1);  // blocked by none: the helpers
    for (int signal : {SIGTERM, SIGINT, SIGHUP}) {
      INFO("signal " << signal);
      CHECK(helper_threads_open_to(pid, signal).empty());
    }
  }
  cohort->signal(SIGINT);
  cohort->signal(SIGTERM);  // the second: kills the workers at once, ends no thread
  auto status = cohort->wait(30s);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK_FALSE(status->signaled);
  CHECK(status->shell_code() == 130);
  daemon->signal(SIGTERM);
  daemon->signal(SIGTERM);
  auto daemon_status = daemon->wait(30s);
  REQUIRE(daemon_status.has_value());
  CHECK_FALSE(daemon_status->signaled);
  CHECK(daemon_status->shell_code() == 143);
  CHECK(scratch.nothing_left());
}

// `nohup cohort run ... &` must outlive the terminal: torchrun's agent catches SIGHUP whatever it
// inherited, so a closed terminal stops a nohup'd torchrun ("SignalException: Process got signal:
// 1"). cohort leaves an inherited ignore of SIGHUP in place, for itself and its workers; the
// other stop signals still stop it. The hangup is sent as a shell sends it to a job: to cohort's
// process group (under nohup, to each worker too).
TEST_CASE("under nohup a hangup stops nothing: cohort and its workers keep SIGHUP ignored",
          "[integration][run][signals]") {
  Scratch scratch;
  bool under_nohup = GENERATE(true, false);
  INFO("under nohup: " << under_nohup);
  std::vector<std::string> argv =
      Scratch::cohort_argv({"--nproc-per-node", "2", "--no-python", kWorker, "--pid-file",
                            scratch.file("pid_${local_rank}"), "--ready-file",
                            scratch.file("ready_${local_rank}"), "--hang"});
  if (under_nohup) argv.insert(argv.begin(), "/usr/bin/nohup");
  ChildProcess cohort(argv, scratch.options());
  REQUIRE(all_ready(scratch, 2));
  std::vector<pid_t> workers = read_pids(scratch, "pid", 2);
  REQUIRE(wait_until([&] { return in_signal_mask(cohort.pid(), "SigCgt", SIGTERM); }));
  CHECK(in_signal_mask(cohort.pid(), "SigIgn", SIGHUP) == under_nohup);
  for (pid_t worker : workers) {
    CHECK(in_signal_mask(worker, "SigIgn", SIGHUP) == under_nohup);
    CHECK_FALSE(in_signal_mask(worker, "SigIgn", SIGTERM));
    CHECK_FALSE(in_signal_mask(worker, "SigIgn", SIGINT));
  }
  ::kill(-cohort.pid(), SIGHUP);
  if (under_nohup) {
    for (pid_t worker : workers) ::kill(worker, SIGHUP);
    std::this_thread::sleep_for(500ms);
    CHECK_FALSE(cohort.wait(0ms).has_value());
    for (pid_t worker : workers) CHECK(process_alive(worker));
    cohort.signal(SIGTERM);
  }
  auto status = cohort.wait(30s);
  INFO(cohort.output());
  REQUIRE(status.has_value());
  CHECK_FALSE(status->signaled);
  CHECK(status->shell_code() == (under_nohup ? 143 : 129));
  CHECK(all_gone(workers));
  CHECK(scratch.nothing_left());
}

TEST_CASE("Ctrl-Z (SIGTSTP) stops cohort with its workers and SIGCONT continues the same round",
          "[integration][run][signals]") {
  Scratch scratch;
  // A pause of 4 s is past the heartbeat timeout (1 s), the keeper's stale limit (3 s) and the
  // hang timeout (1 s): none of them may count it.
  auto cohort = scratch.start(
      {"--nproc-per-node", "2", "--hang-timeout", "1", "--rdzv-conf",
       "heartbeat_interval=0.2,heartbeat_timeout=1", "--no-python", "sh", "-c",
       "echo $$$$ > " + scratch.file("pid_${local_rank}") +
           "; i=0; while [ $i -lt 30 ]; do echo tick $i; i=$((i+1)); sleep 0.1; done"});
  REQUIRE(wait_until([&] { return contains(cohort->output(), "tick 3"); }));
  std::vector<pid_t> workers = read_pids(scratch, "pid", 2);
  std::vector<pid_t> stopped = workers;
  stopped.push_back(cohort->pid());

  cohort->signal(SIGTSTP);
  CHECK(all_paused(stopped));
  std::this_thread::sleep_for(4s);
  INFO(describe_processes(stopped));
  CHECK(process_state(cohort->pid()) == "T");
  for (pid_t worker : workers) CHECK(paused(worker));  // not killed by the keeper
  size_t ticks_while_stopped = occurrences(cohort->output(), "tick ");
  std::this_thread::sleep_for(300ms);
  CHECK(occurrences(cohort->output(), "tick ") == ticks_while_stopped);

  cohort->signal(SIGCONT);
  auto status = cohort->wait(30s);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 0);
  CHECK(occurrences(cohort->output(), "tick 29") == 2);  // each worker once: no restart
  CHECK_FALSE(contains(cohort->err(), "rejoining"));
  CHECK_FALSE(contains(cohort->err(), "hung"));
  CHECK_FALSE(contains(cohort->err(), "no sign of life"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("flag --signals-to-handle SIGTSTP: Ctrl-Z goes to the workers and cohort runs on",
          "[integration][run][signals]") {
  Scratch scratch;
  auto cohort = scratch.start(concat({"--nproc-per-node", "1", "--signals-to-handle",
                                      "SIGTERM,SIGTSTP", "--shutdown-timeout", "20"},
                                     hanging_worker(scratch, {"--exit-on-signal", "0"})));
  REQUIRE(all_ready(scratch, 1));
  std::vector<pid_t> workers = read_pids(scratch, "pid", 1);
  cohort->signal(SIGTSTP);
  CHECK(all_stopped(workers));  // SIGTSTP's default action, in the worker
  CHECK(process_state(cohort->pid()) != "T");
  // The stop's SIGTERM reaches the stopped worker at once: cohort continues it (SIGCONT), as a
  // shell's kill does, instead of SIGKILLing it after --shutdown-timeout.
  cohort->signal(SIGTERM);
  auto status = cohort->wait(10s);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 143);
  CHECK(read_file(scratch.file("signals_0")) == std::to_string(SIGTERM) + "\n");
  CHECK_FALSE(contains(cohort->err(), "did not stop within the shutdown timeout"));
  CHECK(all_gone(workers));
  CHECK(scratch.nothing_left());
}

TEST_CASE("Ctrl-Z while the workers stop: the pause is not taken from their shutdown timeout",
          "[integration][run][signals]") {
  Scratch scratch;
  // Each worker needs 1 s to stop once told (its TERM trap); --shutdown-timeout 3; cohort is
  // paused for 4 s in between. Before the pause was forgiven, fg SIGKILLed them at once.
  auto cohort = scratch.start(
      {"--nproc-per-node", "2", "--shutdown-timeout", "3", "--no-python", "sh", "-c",
       "trap 'sleep 1; touch " + scratch.file("clean_${local_rank}") + "; exit 0' TERM; touch " +
           scratch.file("ready_${local_rank}") + "; while :; do sleep 0.05; done"});
  REQUIRE(all_ready(scratch, 2));
  cohort->signal(SIGTERM);
  REQUIRE(wait_until([&] { return contains(cohort->err(), "received SIGTERM"); }));
  auto status = pause_then_wait(*cohort, 4s);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 143);
  CHECK_FALSE(contains(cohort->err(), "did not stop within the shutdown timeout"));
  for (int local_rank = 0; local_rank < 2; ++local_rank)
    CHECK(file_exists(numbered(scratch, "clean", local_rank)));
  CHECK(scratch.nothing_left());
}
