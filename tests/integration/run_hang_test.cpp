// `cohort run` with hang detection: a worker that heartbeats through the shipped Python module
// and then wedges is found within the timeout, named with the function it hung in, and restarted;
// a worker that only prints and then goes quiet is found too; torchrun's FileTimer pipe is served
// (a FileTimerClient scope that runs out kills its worker); a hang waits for the NCCL flight
// recorder's dumps (a fake worker that writes its dump 2 s after its pipe is written), and a pause
// (Ctrl-Z) is taken neither from that wait nor from the hung worker's time to go; the shipped
// module beats nowhere in a subprocess that inherited the variable but not the pipe, and drops a
// step that is no integer. Real cohort, real Python and test_worker processes; each run is
// bounded in time.
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <map>
#include <regex>

#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

const std::string kHangWorker = std::string(kSourceDir) + "/tests/integration/hang_worker.py";
const std::map<std::string, std::string> kPythonEnv{{"PYTHON_EXEC", kPython}};

/// The seconds of silence in "made no progress for S s", or -1.
double silence_in(const std::string& text) {
  std::smatch match;
  if (!std::regex_search(text, match, std::regex(R"(made no progress for ([0-9.]+) s)"))) return -1;
  return std::stod(match[1]);
}

}  // namespace

TEST_CASE("a worker that heartbeats and then wedges is found, named and restarted",
          "[integration][run][hang]") {
  Scratch scratch;
  std::string logs = scratch.file("logs");
  auto started = std::chrono::steady_clock::now();
  std::map<std::string, std::string> env = kPythonEnv;
  env["HANG_WORKER_MARKS"] = scratch.file("marks");
  RunResult result =
      scratch.run({"--nproc-per-node", "2", "--hang-timeout", "2", "--max-restarts", "1",
                   "--log-dir", logs, "--rdzv-id", "hang", kHangWorker, "heartbeat-hang", "1"},
                  env);
  auto took = std::chrono::steady_clock::now() - started;
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);  // the second attempt finished
  CHECK(file_exists(scratch.file("marks/attempt_1.rank0")));
  CHECK(file_exists(scratch.file("marks/attempt_1.rank1")));
  // Found within the timeout + 1 s of its last heartbeat, step 4.
  double silence = silence_in(result.err);
  CHECK(silence >= 2.0);
  CHECK(silence <= 3.0);
  CHECK(contains(result.err, "rank 1 (local rank 1, pid "));
  CHECK(contains(result.err, "(last signal: step 4 at "));
  CHECK(contains(result.err, "; hung in File \"" + kHangWorker));
  CHECK(contains(result.err, "in wedged_in_allreduce"));
  std::string stacks = run_log_dir(logs, "hang") + "/attempt_0/hang-rank1.txt";
  CHECK(contains(result.err, "; stacks in " + stacks));
  REQUIRE(file_exists(stacks));
  CHECK(contains(read_file(stacks), "in wedged_in_allreduce"));
  CHECK(contains(read_file(stacks), "in heartbeat_hang"));
  CHECK(took < std::chrono::seconds(30));
  CHECK(scratch.nothing_left());
}

// The README's hang example, as written there: rank 1 wedges after step 4 while rank 0 finishes
// (a few ms after its own step 4). The root cause across nodes is rank 1, never the rank that
// ended on its own, and nothing is left in the working directory but the --log-dir.
TEST_CASE("the README's hang example names rank 1 as the root cause and leaves no files behind",
          "[integration][run][hang]") {
  Scratch scratch;
  RunResult result = scratch.run({"--nproc-per-node", "2", "--hang-timeout", "2", "--log-dir",
                                  "logs", "--rdzv-id", "demo", kHangWorker, "heartbeat-hang", "1"},
                                 kPythonEnv);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 128 + SIGABRT);
  CHECK(std::regex_search(
      result.err,
      std::regex(
          R"(root cause across nodes: rank 1 on [^\n]* stopped making progress at step 4)")));
  CHECK_FALSE(contains(result.err, "root cause across nodes: rank 0"));
  CHECK_FALSE(contains(result.err, "waited on it"));  // rank 0 finished: it waited on nobody
  CHECK(entries_starting_with(scratch.path(), "attempt_").empty());
  CHECK(scratch.nothing_left());
}

TEST_CASE("the failure summary of a hang says who, for how long, and where it hung",
          "[integration][run][hang]") {
  Scratch scratch;
  RunResult result = scratch.run(
      {"--nproc-per-node", "2", "--hang-timeout", "1.5", kHangWorker, "heartbeat-hang", "0"},
      kPythonEnv);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 128 + SIGABRT);
  std::string summary = failure_summary(result.err);
  CHECK(contains(summary, "hang      : rank 0 (local rank 0, pid "));
  CHECK(contains(summary, "made no progress for "));
  CHECK(contains(summary, "hung in   : File \"" + kHangWorker));
  CHECK(contains(summary, "in wedged_in_allreduce"));
  CHECK(contains(summary, "stacks    : "));
  CHECK(contains(summary, "signal    : SIGABRT"));
  CHECK(scratch.nothing_left());
}

namespace {

// What hang_worker.py's flight-recorder mode writes as rank `rank`'s dump.
std::string fake_dump(int rank) {
  std::string dump;
  for (int i = 0; i < 200; ++i) dump += "rank " + std::to_string(rank) + " entry\n";
  return dump;
}

}  // namespace

TEST_CASE("a hang waits for the NCCL flight recorder's dumps, keeps them and names them",
          "[integration][run][hang]") {
  Scratch scratch;
  std::string logs = scratch.file("logs");
  RunResult result = scratch.run({"--nproc-per-node", "2", "--hang-timeout", "1", "--log-dir", logs,
                                  "--rdzv-id", "dumps", kHangWorker, "flight-recorder", "1"},
                                 kPythonEnv);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 128 + SIGABRT);
  std::string summary = failure_summary(result.err);
  CHECK(contains(summary, "hang      : rank 1 (local rank 1, pid "));
  CHECK(contains(summary, "in wedged_in_allreduce"));
  for (int rank : {0, 1}) {
    std::string dump =
        run_log_dir(logs, "dumps") + "/attempt_0/nccl_trace_rank_" + std::to_string(rank);
    REQUIRE(file_exists(dump));
    CHECK(read_file(dump) == fake_dump(rank));  // written whole, in its two parts
    CHECK(contains(summary, "nccl dump : flight recorder dump of rank " + std::to_string(rank) +
                                ": " + dump + " (" + std::to_string(fake_dump(rank).size()) +
                                " bytes)"));
  }
  // Rank 0 beat on while the dumps were gathered (2 s): it did not wait on rank 1.
  CHECK(contains(result.err, "stopped making progress at step 4; 1 rank still made progress"));
  CHECK_FALSE(contains(result.err, "waited on it"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("Ctrl-Z during a hang's wait for the dumps: the pause is not taken from the wait",
          "[integration][run][hang][signals][timing]") {
  Scratch scratch;
  std::string logs = scratch.file("logs");
  // Each rank writes its dump 2 s after it is asked, the wait is 3 s, and cohort is paused for
  // 4 s once it asks. Before the pause was forgiven, fg ended the wait with no dump.
  auto cohort =
      scratch.start({"--nproc-per-node", "2", "--hang-timeout", "1", "--hang-dump-timeout", "3",
                     "--log-dir", logs, "--rdzv-id", "paused", kHangWorker, "flight-recorder", "1"},
                    kPythonEnv);
  // The dumps are asked for in the same turn as this line.
  REQUIRE(wait_until([&] { return contains(cohort->err(), "taking its stacks"); }, 30s));
  auto status = pause_then_wait(*cohort, 4s);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 128 + SIGABRT);
  for (int rank : {0, 1}) {
    std::string dump =
        run_log_dir(logs, "paused") + "/attempt_0/nccl_trace_rank_" + std::to_string(rank);
    CHECK(read_file(dump) == fake_dump(rank));
  }
  CHECK(contains(failure_summary(cohort->err()), "in wedged_in_allreduce"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("Ctrl-Z while a hung worker is aborted: the pause is not taken from its 5 s to go",
          "[integration][run][hang][signals]") {
  Scratch scratch;
  // The hung worker takes 2 s to go once aborted (its ABRT trap); cohort SIGKILLs it 5 s after
  // SIGABRT, and is paused for 6 s in between. Before the pause was forgiven, fg SIGKILLed it at
  // once, before its trap was done.
  std::string trap = "touch " + scratch.file("aborting") + "; sleep 2; touch " +
                     scratch.file("clean") + "; exit 3";
  auto cohort = scratch.start({"--nproc-per-node", "1", "--hang-timeout", "1",
                               "--hang-first-timeout", "1", "--no-python", "sh", "-c",
                               "trap '" + trap + "' ABRT; while :; do sleep 0.05; done"});
  REQUIRE(wait_until([&] { return file_exists(scratch.file("aborting")); }, 30s));
  auto status = pause_then_wait(*cohort, 6s);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 3);
  CHECK(file_exists(scratch.file("clean")));
  CHECK(scratch.nothing_left());
}

TEST_CASE("with --hang-dump-timeout 0 a hang asks for the dumps but does not wait for them",
          "[integration][run][hang]") {
  Scratch scratch;
  std::string logs = scratch.file("logs");
  RunResult result =
      scratch.run({"--nproc-per-node", "2", "--hang-timeout", "1", "--hang-dump-timeout", "0",
                   "--log-dir", logs, "--rdzv-id", "nowait", kHangWorker, "flight-recorder", "1"},
                  kPythonEnv);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 128 + SIGABRT);
  std::string summary = failure_summary(result.err);
  CHECK(contains(summary, "hang      : rank 1 (local rank 1, pid "));
  CHECK_FALSE(contains(summary, "nccl dump"));
  std::string attempt = run_log_dir(logs, "nowait") + "/attempt_0";
  CHECK(file_exists(attempt + "/nccl_pipe_rank_1.pipe"));    // it made its pipe
  CHECK_FALSE(file_exists(attempt + "/nccl_trace_rank_1"));  // stopped before 2 s
  CHECK(scratch.nothing_left());
}

TEST_CASE("a worker that only prints and then goes quiet is found", "[integration][run][hang]") {
  Scratch scratch;
  auto started = std::chrono::steady_clock::now();
  RunResult result = scratch.run({"--nproc-per-node", "1", "--hang-timeout", "1", "--no-python",
                                  kTestWorkerBin, "--print", "loading data", "--hang"});
  auto took = std::chrono::steady_clock::now() - started;
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 128 + SIGABRT);
  CHECK(contains(result.out, "loading data"));
  std::string summary = failure_summary(result.err);
  CHECK(contains(summary, "hang      : rank 0 (local rank 0, pid "));
  CHECK(contains(summary, "(last signal: at "));  // a line, no step
  double silence = silence_in(summary);
  CHECK(silence >= 1.0);
  CHECK(silence <= 2.0);
  // A native worker prints no traceback: eu-stack takes its stacks, or the summary says how to.
  if (std::system("command -v eu-stack >/dev/null") == 0) {
    CHECK(contains(summary, "hung in   : #0 "));
    CHECK(contains(summary, "/attempt_0/hang-rank0.txt"));
  } else {
    CHECK(contains(summary, "install elfutils (eu-stack)"));
  }
  CHECK(took < std::chrono::seconds(20));
  CHECK(scratch.nothing_left());
}

TEST_CASE("a worker silent from the start is found after the first-signal allowance",
          "[integration][run][hang]") {
  Scratch scratch;
  RunResult result =
      scratch.run({"--nproc-per-node", "1", "--hang-timeout", "0.5", "--hang-first-timeout", "1.5",
                   "--no-python", kTestWorkerBin, "--hang"});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 128 + SIGABRT);
  std::string summary = failure_summary(result.err);
  CHECK(contains(summary, "(last signal: none since it started)"));
  double silence = silence_in(summary);
  CHECK(silence >= 1.5);
  CHECK(silence <= 2.5);
  CHECK(scratch.nothing_left());
}

// A subprocess inherits COHORT_HEARTBEAT_FD but not the pipe; the number it names there may be
// a file of its own: the shipped module must see that and beat nowhere.
TEST_CASE("a subprocess that inherited only the heartbeat variable writes no beat into its file",
          "[integration][run][hang][heartbeat]") {
  Scratch scratch;
  std::string results = scratch.file("results.txt");
  RunResult result =
      scratch.run({"--nproc-per-node", "1", kHangWorker, "subprocess-beats", results}, kPythonEnv);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  CHECK(contains(result.out, "subprocess: beat(7) returned False"));
  CHECK(contains(result.out, results + " holds 'results\\n'"));
  CHECK(read_file(results) == "results\n");
  CHECK(scratch.nothing_left());
}

TEST_CASE("the heartbeat module drops a step that is no integer and never raises",
          "[integration][run][hang][heartbeat]") {
  Scratch scratch;
  RunResult result = scratch.run({"--nproc-per-node", "1", kHangWorker, "odd-steps"}, kPythonEnv);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  for (const char* dropped : {"'epoch-1'", "nan", "inf", "[3]"}) {
    CHECK(contains(result.out, std::string("beat(") + dropped + ") returned False"));
  }
  CHECK(contains(result.out, "beat(5) returned True"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("a FileTimerClient scope that runs out kills its worker, as under torchrun",
          "[integration][run][hang][pytorch]") {
  require_torch();
  Scratch scratch;
  // Crowded: 5,000 scopes for pids that are no worker's come first; they are ignored, and used
  // to fill the agent's 4,096 places so that the worker's own scope was refused.
  const char* mode = GENERATE("file-timer", "file-timer-crowded");
  INFO(mode);
  RunResult result =
      scratch.run({"--nproc-per-node", "1", kHangWorker, mode},
                  {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"PYTHON_EXEC", kPython}});
  double ended =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 128 + SIGKILL);
  CHECK_FALSE(contains(result.out, "the timer did not fire"));
  std::string summary = failure_summary(result.err);
  CHECK(contains(summary, "timer     : FileTimer scope 'long_sleep' expired; killed with SIGKILL"));
  // Killed about 1 s after the scope was entered (the sleep was 30 s); cohort then exits.
  REQUIRE(file_exists(scratch.file("timer_set")));
  double scope_entered = std::stod(read_file(scratch.file("timer_set")));
  CHECK(ended - scope_entered >= 1.0);
  CHECK(ended - scope_entered < 3.0);
  CHECK(scratch.nothing_left());
}

namespace {

// A worker that records each attempt (attempt_<N>) and then runs test_worker with `args`.
std::string attempt_recorder(const Scratch& scratch) {
  std::string script = scratch.file("record_attempt.sh");
  write_script(script, "touch \"" + scratch.path() +
                           "/attempt_${TORCHELASTIC_RESTART_COUNT}\"\nexec '" +
                           std::string(kTestWorkerBin) + "' \"$@\"\n");
  return script;
}

}  // namespace

TEST_CASE("a crash loop ends after 3 identical failures, with restarts left",
          "[integration][run][crash-loop]") {
  Scratch scratch;
  RunResult result = scratch.run({"--nproc-per-node", "1", "--max-restarts", "10", "--no-python",
                                  attempt_recorder(scratch), "--stderr", "RuntimeError: boom",
                                  "--exit-code", "1"});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 1);
  CHECK(file_exists(scratch.file("attempt_2")));
  CHECK_FALSE(file_exists(scratch.file("attempt_3")));
  CHECK(contains(result.err,
                 "cohort: not restarting: a crash loop: the same failure 3 times in a row "
                 "(exit code 1: RuntimeError: boom)"));
  CHECK(contains(failure_summary(result.err), "exitcode  : 1"));
  CHECK(scratch.nothing_left());
}

TEST_CASE(
    "an exit code listed in --no-restart-exit-codes is final at once, --min-uptime labels "
    "a start-up failure",
    "[integration][run][crash-loop]") {
  Scratch scratch;
  RunResult result = scratch.run({"--nproc-per-node", "1", "--max-restarts", "5",
                                  "--no-restart-exit-codes", "2,3", "--min-uptime", "30",
                                  "--no-python", attempt_recorder(scratch), "--exit-code", "3"});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 3);
  CHECK(file_exists(scratch.file("attempt_0")));
  CHECK_FALSE(file_exists(scratch.file("attempt_1")));
  CHECK(contains(result.err,
                 "cohort: not restarting: exit code 3 is final (--no-restart-exit-codes)"));
  CHECK(contains(failure_summary(result.err), "a start-up failure"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("a python3 without torch first on PATH is named, with PYTHON_EXEC, and not restarted",
          "[integration][run][crash-loop]") {
  Scratch scratch;
  // A python3 that cannot see the system's site-packages (where torch would be), as a venv
  // without them would be.
  ::mkdir(scratch.file("bin").c_str(), 0755);
  std::string python = scratch.file("bin/python3");
  write_script(
      python, "echo \"$*\" >> '" + scratch.file("starts") + "'\nexec /usr/bin/python3 -S \"$@\"\n");
  std::string train = scratch.file("train.py");
  std::ofstream(train) << "import torch\n";
  std::string path = scratch.file("bin") + ":" + env_value(own_environment(), "PATH");
  RunResult result =
      scratch.run({"--nproc-per-node", "2", "--max-restarts", "5", train}, {{"PATH", path}});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 1);
  CHECK(contains(result.err, "ModuleNotFoundError: No module named 'torch'"));
  CHECK(contains(result.err,
                 "cohort: not restarting: the workers' Python, " + python + ", has no torch"));
  CHECK(contains(result.err, "PYTHON_EXEC=/usr/bin/python3"));
  // One round, no restart: two workers ran train.py (the agent's torch probe runs it too, with -c).
  std::vector<std::string> starts = split_lines(read_file(scratch.file("starts")));
  CHECK(std::count_if(starts.begin(), starts.end(),
                      [&](const std::string& line) { return contains(line, train); }) == 2);
  CHECK(scratch.nothing_left());
}
