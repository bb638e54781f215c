// The crash-loop rule, pure: the same failure N times in a row, exit codes that are final at
// once, start-up failures; and the agent's report of a failure the rule made final.
#include <catch2/catch.hpp>
#include <csignal>

#include "agent/agent_state.hpp"
#include "agent/crash_loop.hpp"

using namespace cohort;
using namespace std::chrono_literals;

namespace {

WorkerFailure failed(ExitStatus status, std::vector<std::string> stderr_tail = {}) {
  WorkerFailure failure;
  failure.rank = 0;
  failure.status = status;
  failure.stderr_tail = std::move(stderr_tail);
  return failure;
}

}  // namespace

TEST_CASE("a failure's cause: its status and its last stderr line", "[unit][agent][crash-loop]") {
  CHECK(failure_cause(failed(ExitStatus::exited(1), {"Traceback", "RuntimeError: boom", "  "})) ==
        "exit code 1: RuntimeError: boom");
  CHECK(failure_cause(failed(ExitStatus::killed_by(SIGSEGV))) == "signal 11 (SIGSEGV)");
}

TEST_CASE("a Python worker without torch is final at once, naming the interpreter",
          "[unit][agent][crash-loop]") {
  const std::vector<std::string> tail{"Traceback (most recent call last):", "    import torch",
                                      "ModuleNotFoundError: No module named 'torch'"};
  SECTION("through python: which interpreter, and how to choose another") {
    CrashLoopRule rule({3, {}, 0ms, "/opt/venv/bin/python3"});
    std::string reason = rule.judge(failed(ExitStatus::exited(1), tail));
    CHECK(reason.find("the workers' Python, /opt/venv/bin/python3, has no torch") !=
          std::string::npos);
    CHECK(reason.find("PYTHON_EXEC=/usr/bin/python3") != std::string::npos);
  }
  SECTION("another missing module is an ordinary failure") {
    CrashLoopRule rule({3, {}, 0ms, "/opt/venv/bin/python3"});
    CHECK(rule.judge(failed(ExitStatus::exited(1), {"ModuleNotFoundError: No module named "
                                                    "'torchvision'"}))
              .empty());
  }
  SECTION("--no-python: not cohort's interpreter to name") {
    CrashLoopRule rule({3, {}, 0ms, ""});
    CHECK(rule.judge(failed(ExitStatus::exited(1), tail)).empty());
  }
}

TEST_CASE("the same failure three times in a row is a crash loop", "[unit][agent][crash-loop]") {
  CrashLoopRule rule(CrashLoopSettings{});
  WorkerFailure boom = failed(ExitStatus::exited(1), {"RuntimeError: boom"});
  CHECK(rule.judge(boom).empty());
  CHECK(rule.judge(boom).empty());
  std::string verdict = rule.judge(boom);
  CHECK(verdict ==
        "a crash loop: the same failure 3 times in a row (exit code 1: RuntimeError: boom)");
}

TEST_CASE("a different failure or a success ends the streak", "[unit][agent][crash-loop]") {
  CrashLoopRule rule(CrashLoopSettings{});
  WorkerFailure boom = failed(ExitStatus::exited(1), {"RuntimeError: boom"});
  WorkerFailure other = failed(ExitStatus::exited(1), {"RuntimeError: other"});
  CHECK(rule.judge(boom).empty());
  CHECK(rule.judge(boom).empty());
  CHECK(rule.judge(other).empty());
  CHECK(rule.judge(boom).empty());
  rule.succeeded();
  CHECK(rule.judge(boom).empty());
  CHECK(rule.judge(boom).empty());
  CHECK_FALSE(rule.judge(boom).empty());
}

TEST_CASE("a failure after a stop starts or lengthens a streak but never breaks one",
          "[unit][agent][crash-loop]") {
  CrashLoopRule rule(CrashLoopSettings{});
  WorkerFailure boom = failed(ExitStatus::exited(1), {"RuntimeError: boom"});
  WorkerFailure stopped = failed(ExitStatus::exited(1), {"terminated by the launcher"});
  rule.failed_after_stop(boom);
  CHECK(rule.judge(boom).empty());
  rule.failed_after_stop(stopped);  // another cause: maybe the stop's doing, so left out
  CHECK_FALSE(rule.judge(boom).empty());
}

TEST_CASE("flag --max-same-failures 0 is off, 1 stops at the first failure",
          "[unit][agent][crash-loop]") {
  CrashLoopRule off(CrashLoopSettings{0, {}, 0ms});
  WorkerFailure boom = failed(ExitStatus::exited(1));
  for (int i = 0; i < 10; ++i) CHECK(off.judge(boom).empty());
  CrashLoopRule once(CrashLoopSettings{1, {}, 0ms});
  CHECK_FALSE(once.judge(boom).empty());
}

TEST_CASE("an exit code listed in --no-restart-exit-codes is final at once",
          "[unit][agent][crash-loop]") {
  CrashLoopRule rule(CrashLoopSettings{3, {2, 3}, 0ms});
  CHECK(rule.judge(failed(ExitStatus::exited(3))) ==
        "exit code 3 is final (--no-restart-exit-codes)");
  CHECK(rule.judge(failed(ExitStatus::exited(4))).empty());
  CHECK(rule.judge(failed(ExitStatus::killed_by(3))).empty());  // signal 3, not exit code 3
}

TEST_CASE("a failure within --min-uptime is a start-up failure", "[unit][agent][crash-loop]") {
  WorkerFailure early = failed(ExitStatus::exited(1));
  early.uptime = 400ms;
  WorkerFailure late = early;
  late.uptime = 5000ms;
  CHECK_FALSE(CrashLoopRule(CrashLoopSettings{}).startup_failure(early));  // off by default
  CrashLoopRule rule(CrashLoopSettings{3, {}, 2000ms});
  CHECK(rule.startup_failure(early));
  CHECK_FALSE(rule.startup_failure(late));
}

TEST_CASE("the agent reports a crash loop as final, and its summary says so",
          "[unit][agent][crash-loop]") {
  agent::Settings settings{
      "train.py", "hostA", "job", false, 30000ms, {}, CrashLoopSettings{2, {}, 1000ms}};
  agent::AgentState state(settings);
  state.start();
  std::vector<WorkerFailure> failures{failed(ExitStatus::exited(1), {"boom"})};
  for (int round = 0; round < 2; ++round) {
    proto::RoundAssigned assigned;
    assigned.round = round;
    assigned.restarts_used = round;
    assigned.max_restarts = 5;  // restarts left: the loop is the reason the run ends
    state.round_assigned(assigned);
    REQUIRE(state.phase() == agent::AgentState::Phase::Running);
    agent::Actions actions = state.group_failed(failures);
    const agent::ReportFailure* report = nullptr;
    for (const auto& action : actions) {
      if (auto* found = std::get_if<agent::ReportFailure>(&action)) report = found;
    }
    REQUIRE(report);
    CHECK(report->root_cause.startup_failure);  // uptime 0 < 1 s
    CHECK(report->report.summary.find("a start-up failure") != std::string::npos);
    if (round == 0) {
      CHECK(report->report.final_reason.empty());
    } else {
      CHECK(report->report.final_reason ==
            "a crash loop: the same failure 2 times in a row (exit code 1: boom)");
      CHECK(report->report.summary.find("cohort: not restarting: a crash loop") !=
            std::string::npos);
    }
    state.restart("again");
  }
}
