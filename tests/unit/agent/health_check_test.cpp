// health_problem: healthy on exit 0, else the status or the timeout with the tail of the output;
// HealthCheck against a fake spawner: a check ended early hears nothing of its command's end.
#include "agent/health_check.hpp"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <csignal>
#include <memory>
#include <optional>

#include "tests/support/fake_process_spawner.hpp"

using namespace cohort;
using namespace std::chrono_literals;

TEST_CASE("a health check's verdict names the status and quotes the last lines",
          "[unit][agent][health]") {
  CHECK(health_problem(ExitStatus::exited(0), false, 60s, "all good\n").empty());
  CHECK(health_problem(ExitStatus::exited(3), false, 60s, "") ==
        "the health check failed with exit code 3");
  CHECK(health_problem(ExitStatus::exited(1), false, 60s, "checking\nGPU 3: ECC errors\n") ==
        "the health check failed with exit code 1: checking | GPU 3: ECC errors");
  CHECK(health_problem(ExitStatus::killed_by(9), true, 1500ms, "") ==
        "the health check ran past its 1.5 s timeout");
  std::string lines;
  for (int i = 0; i < 20; ++i) lines += "line " + std::to_string(i) + "\n";
  CHECK(
      health_problem(ExitStatus::exited(1), false, 60s, lines) ==
      "the health check failed with exit code 1: line 15 | line 16 | line 17 | line 18 | line 19");
  std::string huge(100000, 'x');
  CHECK(health_problem(ExitStatus::exited(1), false, 60s, huge).size() < 2200);
  CHECK(health_problem(ExitStatus::exited(1), false, 60s, "bad\x1b[31m\n").find('\x1b') ==
        std::string::npos);
}

// A stop while the command runs ends the check (the agent drops it); the command, killed then,
// is reaped afterwards. Its end used to reach the freed check (SIGSEGV on a scancel).
TEST_CASE("a health check ended while its command runs kills it and hears nothing of its end",
          "[unit][agent][health]") {
  boost::asio::io_context io;
  test::FakeProcessSpawner spawner;
  HealthSettings settings;
  settings.command = "sleep 60";
  int verdicts = 0;
  auto check = std::make_unique<HealthCheck>(io, spawner, settings, std::vector<std::string>{});
  check->run([&](const std::string&) { ++verdicts; });
  REQUIRE(spawner.pids().size() == 1);
  pid_t command = spawner.pids().front();
  check.reset();
  CHECK(spawner.group_signals(command) == std::vector<int>{SIGKILL});
  spawner.exit(command, ExitStatus::killed_by(SIGKILL));
  CHECK(verdicts == 0);
  // A check that lives hears its command's end.
  HealthCheck kept(io, spawner, settings, {});
  std::optional<std::string> verdict;
  kept.run([&](const std::string& problem) { verdict = problem; });
  spawner.exit(spawner.pids().back(), ExitStatus::exited(0));
  REQUIRE(verdict.has_value());
  CHECK(verdict->empty());
}
