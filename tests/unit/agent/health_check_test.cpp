// health_problem: healthy on exit 0, else the status or the timeout with the tail of the output.
#include "agent/health_check.hpp"

#include <catch2/catch.hpp>

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
