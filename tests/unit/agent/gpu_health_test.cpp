#include "agent/gpu_health.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>

#include "common/text.hpp"
#include "tests/support/fake_clock.hpp"

using namespace cohort;
using cohort::test::FakeClock;
using namespace std::chrono_literals;

namespace {

GpuState gpu(int index, std::vector<pid_t> processes = {}) {
  GpuState state;
  state.index = index;
  state.bus_id = index == 0 ? "0000:07:00.0" : "0000:0b:00.0";
  state.processes = std::move(processes);
  return state;
}

const std::vector<int> kTwo{0, 1};

GpuHealthSettings every_gpu() {
  GpuHealthSettings settings;
  settings.visible = [](int physical) {
    std::vector<int> all;
    for (int index = 0; index < physical; ++index) all.push_back(index);
    return all;
  };
  settings.reclaim_timeout = 2s;
  return settings;
}

bool none_of_the_previous_round(pid_t) { return false; }

}  // namespace

TEST_CASE("well GPUs make no problem", "[unit][agent][gpu-health]") {
  CHECK(gpu_problem(std::vector<GpuState>{gpu(0, {77}), gpu(1)}, kTwo, 2s,
                    none_of_the_previous_round) == "");
}

TEST_CASE("each GPU problem is named with the GPU's index and bus id",
          "[unit][agent][gpu-health]") {
  CHECK(gpu_problem(std::nullopt, kTwo, 2s, none_of_the_previous_round) ==
        "NVML no longer answers (the driver or a GPU has failed)");
  CHECK(gpu_problem(std::vector<GpuState>{gpu(0)}, kTwo, 2s, none_of_the_previous_round) ==
        "expected 2 GPUs, NVML sees 1 of them (1 in all)");

  std::vector<GpuState> sick{gpu(0), gpu(1, {4242, 99})};
  sick[0].uncorrected_ecc = 3;
  sick[1].memory_repair_pending = true;
  auto previous = [](pid_t pid) { return pid == 4242; };
  CHECK(gpu_problem(sick, kTwo, 2s, previous) ==
        "a process of the previous round still holds a GPU after the 2 s --gpu-reclaim-timeout: "
        "GPU 1 (0000:0b:00.0) held by pid 4242; GPU 0 (0000:07:00.0) has 3 uncorrectable ECC "
        "error(s); GPU 1 (0000:0b:00.0) has a row remap or page retirement pending (it needs a "
        "reset)");
}

TEST_CASE("GPUs outside CUDA_VISIBLE_DEVICES are not the node's concern",
          "[unit][agent][gpu-health]") {
  std::vector<GpuState> gpus{gpu(0), gpu(1)};
  gpus[0].uncorrected_ecc = 1;
  CHECK(gpu_problem(gpus, {1}, 2s, none_of_the_previous_round) == "");
}

TEST_CASE("the check waits for the previous round's GPU memory until the reclaim timeout",
          "[unit][agent][gpu-health]") {
  FakeClock clock;
  std::vector<GpuState> reading{gpu(0, {getpid()}), gpu(1)};
  GpuHealthCheck check(clock, every_gpu(), [&] { return std::optional(reading); });
  std::optional<std::string> problem;
  auto done = [&](const std::string& said) { problem = said; };

  SECTION("released in time: healthy") {
    check.run({getpid()}, done);
    clock.advance(500ms);
    CHECK_FALSE(problem.has_value());
    CHECK(check.running());
    reading[0].processes.clear();
    clock.advance(100ms);
    REQUIRE(problem.has_value());
    CHECK(*problem == "");
    CHECK_FALSE(check.running());
  }
  SECTION("still held at the timeout: unhealthy, naming the pid") {
    check.run({getpid()}, done);
    clock.advance(1900ms);
    CHECK_FALSE(problem.has_value());
    clock.advance(200ms);
    REQUIRE(problem.has_value());
    CHECK(problem->find(cat("held by pid ", getpid())) != std::string::npos);
  }
  SECTION("a process of another round or job is no reason to wait") {
    check.run({12345678}, done);
    REQUIRE(problem.has_value());
    CHECK(*problem == "");
  }
}

TEST_CASE("a node whose first reading finds no GPU or no NVML is never checked",
          "[unit][agent][gpu-health]") {
  FakeClock clock;
  GpuReading reading;  // no NVML
  int reads = 0;
  GpuHealthCheck check(clock, every_gpu(), [&] {
    ++reads;
    return reading;
  });
  std::optional<std::string> problem;
  check.run({}, [&](const std::string& said) { problem = said; });
  REQUIRE(problem.has_value());
  CHECK(*problem == "");
  reading = std::vector<GpuState>{gpu(0)};  // a GPU appearing later is not the node's
  reading->at(0).uncorrected_ecc = 1;
  problem.reset();
  check.run({}, [&](const std::string& said) { problem = said; });
  REQUIRE(problem.has_value());
  CHECK(*problem == "");
}

TEST_CASE("the reading made ahead serves the first check, later checks read again",
          "[unit][agent][gpu-health]") {
  FakeClock clock;
  std::vector<GpuState> reading{gpu(0), gpu(1)};
  int reads = 0;
  GpuHealthCheck check(clock, every_gpu(), [&] {
    ++reads;
    return std::optional(reading);
  });
  check.read_ahead();
  CHECK(reads == 1);
  reading.pop_back();  // after the reading ahead: the first check does not see it
  std::optional<std::string> problem;
  check.run({}, [&](const std::string& said) { problem = said; });
  CHECK(reads == 1);
  REQUIRE(problem.has_value());
  CHECK(*problem == "");
  problem.reset();
  check.run({}, [&](const std::string& said) { problem = said; });
  CHECK(reads == 2);
  REQUIRE(problem.has_value());
  CHECK(*problem == "expected 2 GPUs, NVML sees 1 of them (1 in all)");
}
