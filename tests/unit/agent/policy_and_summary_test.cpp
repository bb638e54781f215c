#include <catch2/catch.hpp>
#include <csignal>

#include "agent/failure_summary.hpp"
#include "rendezvous/restart_policy.hpp"

using namespace cohort;
using namespace std::chrono_literals;

TEST_CASE("restart policy: budget, then give up", "[unit][agent]") {
  CHECK(decide_restart(0, 0).restart == false);
  RestartDecision first = decide_restart(0, 2);
  CHECK(first.restart);
  CHECK(first.delay == 10ms);
  CHECK(decide_restart(1, 2).restart);
  CHECK(decide_restart(1, 2).delay == 40ms);
  CHECK_FALSE(decide_restart(2, 2).restart);
}

TEST_CASE("restart backoff grows and is capped", "[unit][agent]") {
  CHECK(restart_backoff(1) == 10ms);
  CHECK(restart_backoff(2) == 40ms);
  CHECK(restart_backoff(3) == 160ms);
  CHECK(restart_backoff(10) == 5000ms);
  CHECK(restart_backoff(1000) == 5000ms);
}

namespace {
WorkerFailure failure(int rank, ExitStatus status, int seconds) {
  WorkerFailure f;
  f.rank = rank;
  f.local_rank = rank;
  f.pid = 1000 + rank;
  f.status = status;
  f.time = std::chrono::system_clock::time_point(std::chrono::seconds(seconds));
  return f;
}
}  // namespace

TEST_CASE("the root cause is the earliest failure", "[unit][agent]") {
  std::vector<WorkerFailure> failures{failure(0, ExitStatus::exited(1), 20),
                                      failure(1, ExitStatus::killed_by(SIGSEGV), 10)};
  CHECK(root_cause_index(failures) == 1);
  std::string text = format_failure_summary("train.py", "node7", failures);
  CHECK(text.find("train.py FAILED") != std::string::npos);
  size_t root = text.find("Root Cause (first observed failure):");
  REQUIRE(root != std::string::npos);
  std::string root_part = text.substr(root);
  CHECK(root_part.find("rank      : 1 (local_rank: 1)") != std::string::npos);
  CHECK(root_part.find("signal    : SIGSEGV") != std::string::npos);
  CHECK(root_part.find("Signal 11 (SIGSEGV) received by PID 1001") != std::string::npos);
  std::string others = text.substr(0, root);
  CHECK(others.find("exitcode  : 1 (pid: 1000)") != std::string::npos);
  CHECK(others.find("host      : node7") != std::string::npos);
}

TEST_CASE("a failure after the stop is listed among the others and said to be one",
          "[unit][agent]") {
  WorkerFailure later = failure(1, ExitStatus::exited(11), 20);
  later.after_stop = true;
  std::vector<WorkerFailure> failures{failure(0, ExitStatus::exited(10), 10), later};
  std::string text = format_failure_summary("train.py", "h", failures);
  size_t root = text.find("Root Cause (first observed failure):");
  REQUIRE(root != std::string::npos);
  CHECK(text.substr(0, root).find("exitcode  : 11 (pid: 1001)\n") != std::string::npos);
  CHECK(text.substr(0, root).find("  note      : it exited with this code after cohort asked it "
                                  "to stop") != std::string::npos);
  CHECK(text.substr(root).find("note") == std::string::npos);
}

TEST_CASE("a single failure says there are no others and shows its stderr", "[unit][agent]") {
  WorkerFailure only = failure(3, ExitStatus::exited(7), 5);
  only.stderr_tail = {"Traceback (most recent call last):", "ValueError: boom"};
  only.error_file = "/x/error.json";
  only.error_file_written = true;
  only.error_message = "ValueError: boom";
  std::string text = format_failure_summary("train.py", "h", {only});
  CHECK(text.find("<NO_OTHER_FAILURES>") != std::string::npos);
  CHECK(text.find("error_file: /x/error.json") != std::string::npos);
  CHECK(text.find("error     : ValueError: boom") != std::string::npos);
  CHECK(text.find("    ValueError: boom") != std::string::npos);
}

TEST_CASE("a failure whose files were cut short by a full disk says so", "[unit][agent]") {
  WorkerFailure full = failure(0, ExitStatus::exited(1), 5);
  CHECK(format_failure_summary("train.py", "h", {full}).find("note") == std::string::npos);
  full.files_cut = "the filesystem of /logs/0 is full (no space left): ...";
  std::string text = format_failure_summary("train.py", "h", {full});
  CHECK(text.find("  traceback : <none: the worker wrote no error file>\n"
                  "  note      : the filesystem of /logs/0 is full (no space left): ...\n") !=
        std::string::npos);
}

TEST_CASE("a traceback is quoted once, and a temporary error file says it will be removed",
          "[unit][agent]") {
  WorkerFailure python = failure(1, ExitStatus::exited(1), 5);
  python.error_file = "/tmp/cohort_x/run/attempt_0/1/error.json";
  python.error_file_written = true;
  python.error_file_kept = false;
  python.error_message = "ValueError: boom";
  python.traceback =
      "Traceback (most recent call last):\n  File \"t.py\", line 3\nValueError: boom\n";
  python.stderr_tail = {"Traceback (most recent call last):", "  File \"t.py\", line 3",
                        "ValueError: boom"};
  std::string text = format_failure_summary("t.py", "h", {python});
  CHECK(text.find("error_file: /tmp/cohort_x/run/attempt_0/1/error.json (removed at exit; "
                  "--log-dir keeps it)") != std::string::npos);
  CHECK(text.find("stderr    : (ends with the frames above)") != std::string::npos);
  size_t first = text.find("line 3");
  REQUIRE(first != std::string::npos);
  CHECK(text.find("line 3", first + 1) == std::string::npos);

  python.stderr_tail.push_back("and a last word of its own");  // not the traceback: quoted
  CHECK(format_failure_summary("t.py", "h", {python}).find("    and a last word of its own") !=
        std::string::npos);
}
