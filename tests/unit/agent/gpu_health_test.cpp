#include "agent/gpu_health.hpp"

#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <future>
#include <mutex>
#include <thread>

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

namespace {

// A reader on the check's own thread that answers only when the test says so.
struct HeldReader {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::shared_ptr<std::atomic<int>> reads = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<bool>> returned = std::make_shared<std::atomic<bool>>(false);
  std::once_flag released_once;

  void answer() {
    std::call_once(released_once, [this] { release.set_value(); });
  }

  GpuHealthCheck::Reader reader() {
    return [released = released, reads = reads, returned = returned] {
      ++*reads;
      released.wait();
      *returned = true;
      return GpuReading(std::vector<GpuState>{gpu(0), gpu(1)});
    };
  }
};

// Runs `io` until `done` holds, for at most five seconds.
bool run_until(boost::asio::io_context& io, const std::function<bool()>& done) {
  auto give_up = std::chrono::steady_clock::now() + 5s;
  while (!done() && std::chrono::steady_clock::now() < give_up) {
    io.restart();
    io.run_for(10ms);
  }
  return done();
}

}  // namespace

// A driver stuck on a failed GPU may never answer: the node is unhealthy once NVML's answer
// timeout has passed, takes the answer if it comes later, and a stop does not wait for it.
TEST_CASE("a reading NVML does not answer in time makes the node unhealthy",
          "[unit][agent][gpu-health]") {
  boost::asio::io_context io;
  FakeClock clock;
  HeldReader nvml;
  GpuHealthSettings settings = every_gpu();
  settings.answer_timeout = 5s;
  GpuHealthCheck check(io, clock, settings, nvml.reader());
  std::optional<std::string> problem;
  check.run({}, [&](const std::string& said) { problem = said; });
  REQUIRE(run_until(io, [&] { return *nvml.reads == 1; }));
  clock.advance(4900ms);
  CHECK_FALSE(problem.has_value());
  clock.advance(100ms);
  REQUIRE(problem.has_value());
  CHECK(*problem ==
        "NVML did not answer within the 5 s --health-check-timeout: the driver or a GPU is hung");
  // Checked again while the reading still hangs: unhealthy at once, no second reading.
  problem.reset();
  check.run({}, [&](const std::string& said) { problem = said; });
  clock.advance(1ms);
  REQUIRE(problem.has_value());
  CHECK(*nvml.reads == 1);
  // The answer comes after all: the next check takes it.
  nvml.answer();
  problem.reset();
  check.run({}, [&](const std::string& said) { problem = said; });
  REQUIRE(run_until(io, [&] { return problem.has_value(); }));
  CHECK(*problem == "");
  CHECK(*nvml.reads == 1);
}

TEST_CASE("ending the check does not wait for a reading stuck in the driver",
          "[unit][agent][gpu-health]") {
  boost::asio::io_context io;
  FakeClock clock;
  HeldReader nvml;
  auto check = std::make_unique<GpuHealthCheck>(io, clock, every_gpu(), nvml.reader());
  check->read_ahead();
  REQUIRE(run_until(io, [&] { return *nvml.reads == 1; }));
  // Were the check to wait for its thread, the driver "answers" after 3 s, not never.
  std::promise<void> ended;
  std::thread answer_late([&nvml, ended = ended.get_future()] {
    ended.wait_for(3s);
    nvml.answer();
  });
  auto start = std::chrono::steady_clock::now();
  check.reset();
  CHECK(std::chrono::steady_clock::now() - start < 1s);
  ended.set_value();
  answer_late.join();
  // The reading that comes after the check ended goes nowhere.
  REQUIRE(run_until(io, [&] { return nvml.returned->load(); }));
  std::this_thread::sleep_for(20ms);  // past the thread's last step: it delivers nothing
  io.restart();
  CHECK(io.poll() == 0);
}
