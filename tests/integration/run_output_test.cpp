// `cohort run` on one node: where worker output goes. Console line prefixes (default, template,
// raw), whole lines from concurrent workers, --redirects / --tee files, --local-ranks-filter, and
// the temporary log directory cleaned up. Real cohort, real test_worker processes.
#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>

#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

const std::string kWorker = kTestWorkerBin;

// `cohort run` with its log directory on a 64 KiB tmpfs of its own (a private mount namespace,
// so nothing outlives the test), which the workers' lines fill.
RunResult run_on_small_disk(const Scratch& scratch, const std::vector<std::string>& args) {
  static const bool available =
      scratch.run_argv({"/usr/bin/unshare", "-m", "/bin/true"}, scratch.options(), 30s)
          .status.success();
  require_prerequisite(available, "a private mount namespace (unshare -m, as root)");
  std::filesystem::create_directories(scratch.file("small"));
  std::vector<std::string> argv{"/usr/bin/unshare",
                                "-m",
                                "/bin/sh",
                                "-c",
                                "mount -t tmpfs -o size=64k cohort-test \"$0\" && exec \"$@\"",
                                scratch.file("small"),
                                kCohortBin,
                                "run",
                                "--log-dir",
                                scratch.file("small")};
  argv.insert(argv.end(), args.begin(), args.end());
  return scratch.run_argv(argv, scratch.options(), 60s);
}

}  // namespace

TEST_CASE("console lines carry the [roleN]: prefix by default", "[integration][run][output]") {
  Scratch scratch;
  RunResult result = scratch.run({"--nproc-per-node", "2", "--no-python", kWorker, "--print",
                                  "hello from ${local_rank}", "--stderr", "oops ${local_rank}"});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  CHECK(contains(result.out, "[default0]:hello from 0\n"));
  CHECK(contains(result.out, "[default1]:hello from 1\n"));
  CHECK(split_lines(result.out).size() == 2);
  CHECK(contains(result.err, "[default0]:oops 0\n"));
  CHECK(contains(result.err, "[default1]:oops 1\n"));
}

TEST_CASE("lines of concurrent workers are never split or interleaved",
          "[integration][run][output]") {
  Scratch scratch;
  constexpr int kWorkers = 3, kLines = 3000;  // ~50 KiB per worker: many partial pipe reads
  RunResult result = scratch.run({"--nproc-per-node", std::to_string(kWorkers), "--no-python",
                                  kWorker, "--lines", std::to_string(kLines)});
  REQUIRE(result.status.shell_code() == 0);
  const std::regex line_pattern(R"(\[default(\d)\]:line (\d+) of rank (\d))");
  std::vector<int> next(kWorkers, 0);
  size_t bad_lines = 0;
  std::string first_bad;
  for (const std::string& line : split_lines(result.out)) {
    std::smatch match;
    if (!std::regex_match(line, match, line_pattern) || match[1] != match[3] ||
        std::stoi(match[1]) >= kWorkers || std::stoi(match[2]) != next[std::stoi(match[1])]) {
      if (bad_lines++ == 0) first_bad = line;
      continue;
    }
    ++next[std::stoi(match[1])];
  }
  INFO("first bad line: '" << first_bad << "'");
  CHECK(bad_lines == 0);
  for (int rank = 0; rank < kWorkers; ++rank) CHECK(next[rank] == kLines);  // all, in order
}

TEST_CASE("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE sets the prefix", "[integration][run][output]") {
  Scratch scratch;
  RunResult result = scratch.run(
      {"--nproc-per-node", "2", "--role", "trainer", "--no-python", kWorker, "--print", "hi"},
      {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "${role_name}-${rank}|"}});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  CHECK(contains(result.out, "trainer-0|hi\n"));
  CHECK(contains(result.out, "trainer-1|hi\n"));
  CHECK_FALSE(contains(result.out, "[trainer"));
}

TEST_CASE("flag --raw-output prints worker lines unprefixed", "[integration][run][output]") {
  Scratch scratch;
  RunResult result = scratch.run(
      {"--nproc-per-node", "2", "--raw-output", "--no-python", kWorker, "--print", "plain line"});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  CHECK(split_lines(result.out) == std::vector<std::string>{"plain line", "plain line"});
}

TEST_CASE("flag --redirects 3 sends both streams to per-rank files only",
          "[integration][run][output]") {
  Scratch scratch;
  std::string logs = scratch.file("logs");
  RunResult result = scratch.run({"--nproc-per-node", "2", "--redirects", "3", "--log-dir", logs,
                                  "--rdzv-id", "job7", "--no-python", kWorker, "--print",
                                  "out of ${local_rank}", "--stderr", "err of ${local_rank}"});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  for (int local_rank = 0; local_rank < 2; ++local_rank) {
    std::string lr = std::to_string(local_rank);
    std::string dir = run_log_dir(logs, "job7") + "/attempt_0/" + lr;
    CHECK(read_file(dir + "/stdout.log") == "out of " + lr + "\n");
    CHECK(read_file(dir + "/stderr.log") == "err of " + lr + "\n");
  }
  CHECK(result.out.empty());
  CHECK_FALSE(contains(result.err, "err of"));
}

TEST_CASE("flag --tee 1 writes stdout to the file and prints it prefixed",
          "[integration][run][output]") {
  Scratch scratch;
  std::string logs = scratch.file("logs");
  RunResult result = scratch.run({"--nproc-per-node", "2", "--tee", "1", "--log-dir", logs,
                                  "--rdzv-id", "teed", "--no-python", kWorker, "--print",
                                  "out of ${local_rank}", "--stderr", "err of ${local_rank}"});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  for (int local_rank = 0; local_rank < 2; ++local_rank) {
    std::string lr = std::to_string(local_rank);
    std::string dir = run_log_dir(logs, "teed") + "/attempt_0/" + lr;
    CHECK(read_file(dir + "/stdout.log") == "out of " + lr + "\n");
    CHECK(read_file(dir + "/stderr.log").empty());  // stderr is not teed: console only
    CHECK(contains(result.out, "[default" + lr + "]:out of " + lr + "\n"));
    CHECK(contains(result.err, "[default" + lr + "]:err of " + lr + "\n"));
  }
}

TEST_CASE("flag --local-ranks-filter 1 shows only local rank 1", "[integration][run][output]") {
  Scratch scratch;
  RunResult result =
      scratch.run({"--nproc-per-node", "3", "--local-ranks-filter", "1", "--no-python", kWorker,
                   "--print", "out of ${local_rank}", "--stderr", "err of ${local_rank}"});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  CHECK(result.out == "[default1]:out of 1\n");
  CHECK(contains(result.err, "[default1]:err of 1\n"));
  CHECK_FALSE(contains(result.err, "err of 0"));
  CHECK_FALSE(contains(result.err, "err of 2"));
}

TEST_CASE("without --log-dir the temporary log directory is removed",
          "[integration][run][output]") {
  Scratch scratch;
  SECTION("after success") {
    RunResult result = scratch.run(
        {"--nproc-per-node", "2", "--no-python", kWorker, "--dump-env", "env_${local_rank}.json"});
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 0);
  }
  SECTION("after a failure") {
    RunResult result = scratch.run({"--nproc-per-node", "2", "--no-python", kWorker, "--dump-env",
                                    "env_${local_rank}.json", "--only-rank", "0",
                                    "--write-error-file", "boom", "--exit-code", "7"});
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 7);
  }
  // The error files lived under $TMPDIR/cohort_*, and that directory is gone. (Local rank 1 may
  // be stopped before its dump when rank 0 fails; rank 0 always dumps first.)
  std::string error_file =
      env_value(load_env(scratch.file("env_0.json")), "TORCHELASTIC_ERROR_FILE");
  CHECK(error_file.rfind(scratch.tmp() + "/cohort_", 0) == 0);
  CHECK(entries_starting_with(scratch.tmp(), "cohort_").empty());
}

TEST_CASE("without --log-dir the files --redirects and --tee ask for are kept, and said where",
          "[integration][run][output]") {
  Scratch scratch;
  RunResult result =
      scratch.run({"--nproc-per-node", "2", "--redirects", "0:1", "--rdzv-id", "kept",
                   "--no-python", kWorker, "--print", "out of ${local_rank}"});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  std::vector<std::string> temporary = entries_starting_with(scratch.tmp(), "cohort_");
  REQUIRE(temporary.size() == 1);
  std::string run_dir = run_log_dir(scratch.tmp() + "/" + temporary[0], "kept");
  CHECK(read_file(run_dir + "/attempt_0/0/stdout.log") == "out of 0\n");
  CHECK(contains(result.err, "the workers' output files are in " + run_dir + " (kept"));
  CHECK(result.out == "[default1]:out of 1\n");
}

TEST_CASE("a full log filesystem is said and the console still gets every line",
          "[integration][run][output]") {
  Scratch scratch;
  // 2 x 3,000 lines of about 20 bytes: 120 KiB for 64 KiB.
  RunResult teed = run_on_small_disk(
      scratch, {"--nproc-per-node", "2", "--tee", "3", "--no-python", kWorker, "--lines", "3000"});
  INFO(teed.out << teed.err);
  CHECK(teed.status.shell_code() == 0);
  CHECK(contains(teed.out, "[default0]:line 2999 of rank 0\n"));
  CHECK(contains(teed.out, "[default1]:line 2999 of rank 1\n"));
  // Whichever worker's file met the full disk (the other's may have been written whole).
  CHECK(std::regex_search(teed.err, std::regex("cannot write [^ ]*/small/none_[^/]+/attempt_0/[01]/"
                                               "stdout\\.log: No space left on device; the lines "
                                               "still reach the console, the file misses them")));
  CHECK(scratch.nothing_left());
}

TEST_CASE("a worker that fails on a full log filesystem: the summary says why its files are short",
          "[integration][run][output]") {
  Scratch scratch;
  RunResult redirected = run_on_small_disk(
      scratch, {"--redirects", "3", "--no-python", kWorker, "--lines", "6000", "--exit-code", "1"});
  INFO(redirected.out << redirected.err);
  CHECK(redirected.status.shell_code() == 1);
  CHECK(contains(redirected.err, "  note      : the filesystem of "));
  CHECK(contains(redirected.err,
                 "/attempt_0/0 is full (no space left): the worker's output "
                 "files and error file may be cut short or missing"));
  CHECK(contains(redirected.err, "/none_"));
  CHECK(scratch.nothing_left());
}
