// `cohort run` on one node when workers fail: cohort's exit code (the worker's code, or 128 +
// signal), the failure summary, restarts within --max-restarts, and a failing worker stopping the
// others. Real cohort, real test_worker processes.
#include <catch2/catch.hpp>

#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

const std::string kWorker = kTestWorkerBin;

std::string rank_line(int rank, int local_rank) {
  return "rank      : " + std::to_string(rank) + " (local_rank: " + std::to_string(local_rank) +
         ")";
}

}  // namespace

TEST_CASE("a worker's exit code is cohort's exit code", "[integration][run][failure]") {
  Scratch scratch;
  RunResult result = scratch.run(
      {"--nproc-per-node", "2", "--no-python", kWorker, "--only-rank", "1", "--exit-code", "7"});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 7);
  CHECK_FALSE(result.status.signaled);  // cohort itself exits; it is not killed
  std::string summary = failure_summary(result.err);
  CHECK(contains(summary, "FAILED"));
  // torchrun's exception line, just above the frame, for tools that look for it in logs.
  CHECK(
      contains(result.err, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n" +
                               std::string(60, '=') + "\n"));
  CHECK(contains(summary, rank_line(1, 1)));
  CHECK(contains(summary, "exitcode  : 7"));
  CHECK_FALSE(contains(summary, rank_line(0, 0)));  // rank 0 succeeded
  CHECK(scratch.nothing_left());
}

TEST_CASE("a worker killed by SIGSEGV makes cohort exit 139", "[integration][run][failure]") {
  Scratch scratch;
  RunResult result =
      scratch.run({"--nproc-per-node", "2", "--no-python", kWorker, "--crash-signal", "11"});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 139);
  CHECK_FALSE(result.status.signaled);
  std::string summary = failure_summary(result.err);
  CHECK(contains(summary, "SIGSEGV"));
  CHECK(contains(summary, "exitcode  : -11"));
  CHECK((contains(summary, rank_line(0, 0)) || contains(summary, rank_line(1, 1))));
  CHECK(scratch.nothing_left());
}

TEST_CASE("the summary shows the worker's error file and its message",
          "[integration][run][failure]") {
  Scratch scratch;
  std::string root_cause_file = scratch.file("agent_error.json");
  RunResult result =
      scratch.run({"--nproc-per-node", "1", "--no-python", kWorker, "--dump-env", "env.json",
                   "--write-error-file", "ValueError: loss is nan", "--exit-code", "3"},
                  {{"TORCHELASTIC_ERROR_FILE", root_cause_file}});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 3);
  std::string error_file = env_value(load_env(scratch.file("env.json")), "TORCHELASTIC_ERROR_FILE");
  CHECK(ends_with(error_file, "/attempt_0/0/error.json"));
  std::string summary = failure_summary(result.err);
  CHECK(contains(summary, "error_file: " + error_file));
  CHECK(contains(summary, "ValueError: loss is nan"));
  CHECK(contains(summary, "train.py"));  // the traceback test_worker wrote
  CHECK(contains(summary, rank_line(0, 0)));
  // cohort's own TORCHELASTIC_ERROR_FILE gets the root cause, with the worker's real exit code.
  REQUIRE(file_exists(root_cause_file));
  nlohmann::json root = nlohmann::json::parse(read_file(root_cause_file));
  CHECK(root["message"]["errorCode"] == 3);  // where torchrun puts it
  CHECK_FALSE(root.contains("errorCode"));
  CHECK(root["message"]["message"] == "ValueError: loss is nan");
}

// torchrun's layout, <log-dir>/<run-id>_<random>/...: a run again under the same id (the
// default static run's "none"), or another node on a filesystem the nodes share, writes files of
// its own. The second failure, which wrote no error file, once showed the first one's.
TEST_CASE(
    "a run again under the same id and --log-dir neither reads nor mixes the last one's files",
    "[integration][run][failure]") {
  Scratch scratch;
  std::string logs = scratch.file("logs");
  auto fail = [&](std::vector<std::string> worker) {
    std::vector<std::string> args{"--log-dir",   logs,    "--redirects", "3",
                                  "--no-python", kWorker, "--stderr",    "the line of this run"};
    args.insert(args.end(), worker.begin(), worker.end());
    return scratch.run(args);
  };
  RunResult first =
      fail({"--write-error-file", "ValueError: the first run's error", "--exit-code", "3"});
  CHECK(first.status.shell_code() == 3);
  RunResult second = fail({"--exit-code", "4"});
  INFO(second.out << second.err);
  CHECK(second.status.shell_code() == 4);
  CHECK_FALSE(contains(second.err, "the first run's error"));
  std::vector<std::string> dirs = entries_starting_with(logs, "none_");
  REQUIRE(dirs.size() == 2);
  for (const std::string& dir : dirs) {
    CHECK(read_file(logs + "/" + dir + "/attempt_0/0/stderr.log") == "the line of this run\n");
  }
  CHECK(scratch.nothing_left());
}

TEST_CASE("the summary ends with the failing worker's last stderr lines",
          "[integration][run][failure]") {
  Scratch scratch;
  SECTION("stderr on the console") {
    RunResult result =
        scratch.run({"--nproc-per-node", "1", "--no-python", kWorker, "--stderr", "tail line one",
                     "--stderr", "tail line two", "--exit-code", "4"});
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 4);
    CHECK(contains(failure_summary(result.err), "    tail line one\n    tail line two\n"));
  }
  SECTION("stderr redirected to a file") {
    RunResult result =
        scratch.run({"--nproc-per-node", "1", "--redirects", "2", "--log-dir", scratch.file("logs"),
                     "--no-python", kWorker, "--stderr", "tail line one", "--stderr",
                     "tail line two", "--exit-code", "4"});
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 4);
    CHECK(contains(failure_summary(result.err), "    tail line one\n    tail line two\n"));
  }
  SECTION("stderr that is not UTF-8") {  // the summary travels as JSON; it used to abort cohort
    RunResult result = scratch.run({"--nproc-per-node", "1", "--no-python", kWorker, "--stderr",
                                    "latin-1 caf\xe9 \xff\xfe end", "--exit-code", "4"});
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 4);
    CHECK(contains(failure_summary(result.err), "    latin-1 caf"));
    CHECK(contains(failure_summary(result.err), " end\n"));
  }
  CHECK(scratch.nothing_left());
}

TEST_CASE("files a failed worker swapped for a FIFO or a sparse giant do not stall cohort",
          "[integration][run][failure]") {
  Scratch scratch;
  // A FIFO with no writer blocks a plain open for reading: cohort used to wait forever for the
  // error file, and for stderr.log under --redirects, before it printed the summary.
  SECTION("the error file is a FIFO") {
    RunResult result =
        scratch.run({"--nproc-per-node", "1", "--no-python", "/bin/sh", "-c",
                     "mkfifo \"$TORCHELASTIC_ERROR_FILE\"; echo the worker said >&2; exit 3"},
                    {}, 30s);
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 3);
    CHECK(contains(failure_summary(result.err), "the worker said"));
  }
  SECTION("stderr.log is a FIFO") {
    RunResult result = scratch.run(
        {"--nproc-per-node", "1", "--redirects", "2", "--log-dir", scratch.file("logs"),
         "--no-python", "/bin/sh", "-c",
         "echo lost >&2; f=$(readlink /proc/self/fd/2); rm \"$f\"; mkfifo \"$f\"; exit 4"},
        {}, 30s);
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 4);
    CHECK(contains(failure_summary(result.err), "exitcode  : 4"));
  }
  SECTION("stderr.log is a sparse terabyte") {  // only its end is read
    RunResult result =
        scratch.run({"--nproc-per-node", "1", "--redirects", "2", "--log-dir", scratch.file("logs"),
                     "--no-python", "/bin/sh", "-c",
                     "truncate -s 1T /proc/self/fd/2; printf '\\nthe last words\\n' >&2; exit 4"},
                    {}, 30s);
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 4);
    std::string summary = failure_summary(result.err);
    CHECK(contains(summary, "    the last words\n"));
    CHECK_FALSE(contains(summary, "\\x00"));  // the hole's start, cut off
  }
  SECTION("stderr.log ends in a hole") {  // NUL bytes are no text: nothing of them is shown
    RunResult result =
        scratch.run({"--nproc-per-node", "1", "--redirects", "2", "--log-dir", scratch.file("logs"),
                     "--no-python", "/bin/sh", "-c",
                     "printf 'the first words\\n' >&2; truncate -s 1T /proc/self/fd/2; exit 4"},
                    {}, 30s);
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 4);
    CHECK_FALSE(contains(failure_summary(result.err), "\\x00"));
  }
  CHECK(scratch.nothing_left());
}

TEST_CASE("a failure summary too large for a frame is cut, and the restart still comes",
          "[integration][run][failure]") {
  Scratch scratch;
  // A 28,000-line traceback (a deep recursion) in a 980 KB error file: its summary used to exceed
  // the control protocol's frame, and the rendezvous closed the connection (exit 3, no restart).
  const std::string script =
      "import json, os, sys\n"
      "stack = ''.join('  File \"t.py\", line %5d, in f\\n' % i for i in range(28000))\n"
      "json.dump({'message': {'message': 'RecursionError: too deep', 'extraInfo':\n"
      "           {'py_callstack': stack + 'RecursionError: too deep', 'timestamp': '0'}}},\n"
      "          open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w'))\n"
      "sys.exit(5)\n";
  RunResult result = scratch.run(
      {"--nproc-per-node", "1", "--max-restarts", "1", "--no-python", kPython, "-c", script}, {},
      60s);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 5);
  CHECK(contains(result.err, "restarting the workers"));
  std::string summary = failure_summary(result.err);
  CHECK(contains(summary, "bytes, cut to fit ...]"));
  CHECK(contains(summary, "RecursionError: too deep"));
  CHECK(scratch.nothing_left());
}

namespace {

// A worker wrapper that dumps the env of every attempt to its own file,
// env_<local rank>_<restart count>.json, then runs test_worker with the given arguments.
std::string per_attempt_dumper(const Scratch& scratch) {
  std::string script = scratch.file("dump_per_attempt.sh");
  write_script(script, "exec '" + kWorker + "' --dump-env \"" + scratch.path() +
                           "/env_${LOCAL_RANK}_${TORCHELASTIC_RESTART_COUNT}.json\" \"$@\"\n");
  return script;
}

std::string attempt_dump(const Scratch& scratch, int local_rank, int attempt) {
  return scratch.file("env_" + std::to_string(local_rank) + "_" + std::to_string(attempt) +
                      ".json");
}

}  // namespace

TEST_CASE("failed workers are restarted within --max-restarts", "[integration][run][restart]") {
  Scratch scratch;
  std::string wrapper = per_attempt_dumper(scratch);
  // Local rank 0 fails (exit 3) on its first two runs; rank 1 always succeeds.
  RunResult result =
      scratch.run({"--nproc-per-node", "2", "--max-restarts", "2", "--rdzv-id", "restarts",
                   "--no-python", wrapper, "--only-rank", "0", "--fail-first-n-runs", "2",
                   scratch.file("state"), "--exit-code", "3"});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  // Local rank 1 may be stopped before its dump in the failed attempts, never in the last one.
  for (auto [local_rank, attempt] : {std::pair{0, 0}, {0, 1}, {0, 2}, {1, 2}}) {
    INFO("local rank " << local_rank << " attempt " << attempt);
    EnvDump env = load_env(attempt_dump(scratch, local_rank, attempt));
    CHECK(env_value(env, "TORCHELASTIC_RESTART_COUNT") == std::to_string(attempt));
    CHECK(env_value(env, "TORCHELASTIC_MAX_RESTARTS") == "2");
    CHECK(env_value(env, "TORCHELASTIC_RUN_ID") == "restarts");
    CHECK(env_value(env, "RANK") == std::to_string(local_rank));
    CHECK(ends_with(
        env_value(env, "TORCHELASTIC_ERROR_FILE"),
        "/attempt_" + std::to_string(attempt) + "/" + std::to_string(local_rank) + "/error.json"));
  }
  CHECK_FALSE(file_exists(attempt_dump(scratch, 0, 3)));
  CHECK_FALSE(file_exists(attempt_dump(scratch, 1, 3)));
  CHECK(read_file(scratch.file("state")) == "3");
  CHECK(failure_summary(result.err).empty());
  CHECK(scratch.nothing_left());
}

TEST_CASE("when restarts run out cohort fails with the worker's code",
          "[integration][run][restart]") {
  Scratch scratch;
  std::string wrapper = per_attempt_dumper(scratch);
  RunResult result = scratch.run({"--nproc-per-node", "2", "--max-restarts", "1", "--no-python",
                                  wrapper, "--only-rank", "0", "--fail-first-n-runs", "2",
                                  scratch.file("state"), "--exit-code", "3"});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 3);
  CHECK(env_value(load_env(attempt_dump(scratch, 0, 0)), "TORCHELASTIC_RESTART_COUNT") == "0");
  CHECK(env_value(load_env(attempt_dump(scratch, 0, 1)), "TORCHELASTIC_RESTART_COUNT") == "1");
  CHECK_FALSE(file_exists(attempt_dump(scratch, 0, 2)));
  CHECK(read_file(scratch.file("state")) == "2");
  std::string summary = failure_summary(result.err);
  CHECK(contains(summary, rank_line(0, 0)));
  CHECK(contains(summary, "exitcode  : 3"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("a failing worker stops the others", "[integration][run][failure]") {
  Scratch scratch;
  // Rank 0 hangs (and records the signals it gets); rank 1 fails with 5 once rank 0 is ready.
  std::string dir = scratch.path();
  std::string script = scratch.file("one_fails.sh");
  write_script(script,
               "if [ \"$RANK\" = 0 ]; then\n"
               "  exec '" +
                   kWorker + "' --pid-file '" + dir + "/pid_0' --record-signals '" + dir +
                   "/signals_0' --exit-on-signal 0 --ready-file '" + dir +
                   "/ready_0' --hang\n"
                   "fi\n"
                   "i=0\n"
                   "while [ ! -e '" +
                   dir +
                   "/ready_0' ] && [ $i -lt 3000 ]; do\n"
                   "  sleep 0.01; i=$((i + 1))\n"
                   "done\n"
                   "exec '" +
                   kWorker + "' --stderr 'rank 1 gives up' --exit-code 5\n");
  RunResult result =
      scratch.run({"--nproc-per-node", "2", "--shutdown-timeout", "20", "--no-python", script});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 5);
  REQUIRE(file_exists(scratch.file("ready_0")));  // rank 0 really was hanging
  pid_t hung = read_pid(scratch.file("pid_0"));
  CHECK(read_file(scratch.file("signals_0")) == "15\n");  // stopped with SIGTERM
  CHECK(wait_until([&] { return !process_alive(hung); }));
  std::string summary = failure_summary(result.err);
  CHECK(contains(summary, rank_line(1, 1)));
  CHECK(contains(summary, "exitcode  : 5"));
  CHECK(contains(summary, "rank 1 gives up"));
  CHECK_FALSE(contains(summary, rank_line(0, 0)));  // stopped, not failed
  CHECK(scratch.nothing_left());
}

TEST_CASE("a worker that fails with a code of its own after the stop is listed among the failures",
          "[integration][run][failure]") {
  Scratch scratch;
  // Rank 0 fails once rank 1 ignores SIGTERM; rank 1 shrugs off the SIGTERM that follows and
  // fails 0.5 s later, with a code of its own (two ranks that hit the same bug nearly together).
  std::string ready = scratch.file("trap_set");
  RunResult result =
      scratch.run({"--nproc-per-node", "2", "--shutdown-timeout", "20", "--no-python", "sh", "-c",
                   "if [ ${local_rank} = 0 ]; then while [ ! -e " + ready +
                       " ]; do sleep 0.01; done; exit 10; fi; trap '' TERM; touch " + ready +
                       "; sleep 0.5; exit 11"});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 10);
  std::string summary = failure_summary(result.err);
  size_t root = summary.find("Root Cause (first observed failure):");
  REQUIRE(root != std::string::npos);
  std::string others = summary.substr(0, root);
  CHECK_FALSE(contains(others, "<NO_OTHER_FAILURES>"));
  CHECK(contains(others, rank_line(1, 1)));
  CHECK(contains(others, "exitcode  : 11"));
  CHECK(contains(others, "it exited with this code after cohort asked it to stop"));
  CHECK(contains(summary.substr(root), "exitcode  : 10"));
  CHECK(scratch.nothing_left());
}
