// A stop signal at a random moment of `cohort run`: during start-up, a health check (a command's
// or the GPU checks' over a slow NVML), a round, a restart, a hang's teardown. Whatever the
// moment, cohort ends by itself within seconds, with the signal's code (or the run's own, when it
// ended first), never by a crash, and leaves no process behind. The moments come from a seed
// (COHORT_STOP_SEED, else a fresh one), printed on failure so that a run can be replayed.
#include <catch2/catch.hpp>
#include <csignal>
#include <random>
#include <thread>

#include "common/signal_names.hpp"
#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

struct Mode {
  const char* name;
  std::vector<std::string> args;
};

std::vector<Mode> modes() {
  const std::string sleeper = "sleep 5";
  return {
      {"workers running", {"--nproc-per-node", "2", "--no-python", "sh", "-c", sleeper}},
      {"health check running",
       {"--health-check", "sleep 0.1", "--nproc-per-node", "2", "--no-python", "sh", "-c",
        sleeper}},
      {"failing health check",
       {"--health-check", "exit 1", "--health-check-interval", "0.1", "--no-python", "sh", "-c",
        sleeper}},
      {"restarts",
       {"--max-restarts", "3", "--nproc-per-node", "2", "--no-python", "sh", "-c",
        "sleep 0.05; exit 1"}},
      {"hang teardowns",
       {"--hang-timeout", "0.3", "--hang-first-timeout", "0.3", "--max-restarts", "2",
        "--nproc-per-node", "2", "--no-python", "sh", "-c", sleeper}},
      {"slow NVML", {"--nproc-per-node", "2", "--no-python", "sh", "-c", sleeper}},
  };
}

// Acceptable ends: the sent signal's code, the signal itself (it came before cohort's handlers
// were in place), or an exit code of the run's own below 128 (it ended first).
bool clean_end(const cohort::ExitStatus& status, int sent) {
  if (status.signaled) return status.signal == sent;
  return status.code < 128 || status.code == 128 + sent;
}

}  // namespace

TEST_CASE("a stop signal at a random moment of cohort run: a clean end, nothing left",
          "[integration][run][signals]") {
  unsigned seed = stop_seed();
  std::mt19937 random(seed);
  const std::vector<Mode> all = modes();
  const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  for (int trial = 0; trial < 24; ++trial) {
    const Mode& mode = all[random() % all.size()];
    int signal = signals[random() % 4];
    auto delay = std::chrono::milliseconds(random() % 400);
    bool twice = random() % 3 == 0;
    INFO("COHORT_STOP_SEED=" << seed << " trial " << trial << ": " << mode.name << ", "
                             << cohort::signal_name(signal) << " after " << delay.count() << " ms"
                             << (twice ? ", twice" : ""));
    Scratch scratch;
    std::map<std::string, std::string> env;
    if (std::string(mode.name) == "slow NVML") {
      env = {{"COHORT_NVML_LIBRARY", kFakeNvmlLibrary},
             {"COHORT_FAKE_NVML_BUS_IDS", "0000:07:00.0,0000:0b:00.0"},
             {"COHORT_FAKE_NVML_QUERY_MS", "20"}};
    }
    std::vector<std::string> argv{kCohortBin, "run", "--standalone"};
    argv.insert(argv.end(), mode.args.begin(), mode.args.end());
    ChildProcess run(argv, scratch.options(env));
    std::this_thread::sleep_for(delay);
    run.signal(signal);
    if (twice) {
      std::this_thread::sleep_for(std::chrono::milliseconds(random() % 50));
      run.signal(signal);
    }
    auto status = run.wait(10s);
    INFO(run.output());
    REQUIRE(status);
    CHECK(clean_end(*status, signal));
    REQUIRE(scratch.nothing_left());
  }
}
