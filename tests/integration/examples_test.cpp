// The training examples trained end to end under the real cohort: examples/python/train_ddp.py
// (PyTorch DDP, Gloo) and examples/libtorch/train_ddp.cpp (LibTorch c10d, Gloo). For each: the
// gradient synchronisation is exact (2 workers == 1 worker over the same global batches), a worker
// failure resumes from the last checkpoint without losing or repeating a step, a lost node leaves
// a survivor that finishes at a smaller world size, and SIGTERM checkpoints for a later resume.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <map>
#include <set>

#include "tests/integration/training_support.hpp"

using namespace cohort::test;

namespace {

Example python_example() {
  require_torch();
  return Example{"PyTorch",
                 {std::string(kSourceDir) + "/examples/python/train_ddp.py"},
                 {},
                 {"--fail-exit-code", "7"}};
}

Example libtorch_example() {
#ifdef COHORT_TEST_LIBTORCH_TRAIN_DDP
  // Small gradient buckets, so that the model's gradients travel in several of them.
  return Example{"LibTorch",
                 {"--no-python", COHORT_TEST_LIBTORCH_TRAIN_DDP},
                 {"--bucket-cap-kb", "1"},
                 {"--fail-signal", "SIGKILL"}};
#else
  require_prerequisite(false,
                       "examples/libtorch/train_ddp, built when CMake finds LibTorch "
                       "(scripts/setup installs libtorch-dev)");
  return {};
#endif
}

// Debian's python3 (which has torch), and Gloo on loopback only.
std::map<std::string, std::string> training_env() {
  return {{"PYTHON_EXEC", kPython}, {"GLOO_SOCKET_IFNAME", "lo"}};
}

// `cohort run --standalone --nproc-per-node N FLAGS <example> <example extra> ARGS`, on loopback.
std::vector<std::string> single_node(const Example& example, int nproc,
                                     const std::vector<std::string>& flags,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> cohort_args{"--standalone", "--nproc-per-node", std::to_string(nproc)};
  cohort_args = concat(concat(concat(cohort_args, flags), example.program), example.extra);
  return loopback_only(Scratch::cohort_argv(concat(cohort_args, args)));
}

std::vector<double> read_params(const std::string& path) {
  std::vector<double> values;
  for (const std::string& line : split_lines(read_file(path))) values.push_back(std::stod(line));
  return values;
}

// --- gradient synchronisation is exact -----------------------------------------------------

void check_exact_synchronisation(const Example& example) {
  Scratch scratch;
  // 20 steps of a global batch of 16: 2 workers x 8 samples against 1 worker x 16 samples.
  const std::vector<std::string> training{
      "--epochs", "2", "--steps-per-epoch", "10", "--global-batch-size", "16", "--log-every", "5"};
  std::map<int, std::vector<double>> params;
  for (int workers : {2, 1}) {
    std::string dump = scratch.file("params_" + std::to_string(workers));
    RunResult result = scratch.run_argv(
        single_node(example, workers, {}, concat(training, {"--dump-params", dump})),
        scratch.options(training_env()), 180s);
    INFO(example.name << " with " << workers << " workers:\n" << result.out << result.err);
    REQUIRE(result.status.success());
    CHECK(contains(result.out, "round 0: world size " + std::to_string(workers) + ", "));
    CHECK(contains(result.out, "done: 20 steps"));
    params[workers] = read_params(dump);
  }
  REQUIRE(params[2].size() == params[1].size());
  REQUIRE(params[1].size() > 1000);  // 16x64 + 64 + 64 + 1 parameters
  double max_diff = 0;
  for (size_t i = 0; i < params[1].size(); ++i) {
    max_diff = std::max(max_diff, std::abs(params[2][i] - params[1][i]));
  }
  WARN(example.name << ": 2 workers vs 1 worker after 20 SGD steps, " << params[1].size()
                    << " parameters: max abs difference " << max_diff);
  CHECK(max_diff < 1e-5);
  CHECK(scratch.nothing_left());
}

// --- SIGTERM: checkpoint, exit, resume ------------------------------------------------------

void check_sigterm_resume(const Example& example) {
  Scratch scratch;
  const int64_t total = 100;
  const std::string step_log = scratch.file("steps.log");
  // No periodic checkpoint within the run: the one it resumes from is the one SIGTERM made.
  std::vector<std::string> training{
      "--epochs",           "4",     "--steps-per-epoch", "25",
      "--checkpoint-every", "1000",  "--checkpoint-dir",  scratch.file("checkpoints"),
      "--step-log",         step_log};
  ChildProcess first(single_node(example, 2, {"--shutdown-timeout", "20"},
                                 concat(training, {"--step-sleep", "0.05"})),
                     scratch.options(training_env()));
  bool started = wait_until(
      [&] {
        std::optional<StepRecord> last = last_step(step_log);
        return last && last->step >= 10;
      },
      120s);
  INFO(first.output());
  REQUIRE(started);
  first.signal(SIGTERM);
  auto status = first.wait(60s);
  REQUIRE(status);
  CHECK(*status == cohort::ExitStatus::exited(143));
  CHECK(failure_summary(first.err()).empty());
  CHECK_FALSE(contains(first.err(), "Traceback"));  // every worker took the clean way out
  CHECK_FALSE(contains(first.err(), "stopping:"));
  std::vector<StepRecord> before = read_step_log(step_log);
  REQUIRE(!before.empty());
  const int64_t saved = before.back().step + 1;
  CHECK(contains(first.out(),
                 "stop requested: checkpoint at step " + std::to_string(saved) + ", exiting"));
  CHECK(consecutive(before, 0, saved - 1));
  CHECK(saved < total);
  REQUIRE(file_exists(scratch.file("checkpoints/checkpoint.pt")));

  RunResult second = scratch.run_argv(single_node(example, 2, {}, training),
                                      scratch.options(training_env()), 180s);
  INFO(second.out << second.err);
  REQUIRE(second.status.success());
  CHECK(contains(second.out, "resumed from " + scratch.file("checkpoints/checkpoint.pt") +
                                 " at step " + std::to_string(saved)));
  std::vector<StepRecord> all = read_step_log(step_log);
  std::vector<StepRecord> after(all.begin() + static_cast<ptrdiff_t>(before.size()), all.end());
  INFO("after the resume: " << describe(after));
  CHECK(consecutive(after, saved, total - 1));  // every step exactly once over the two runs
  CHECK(scratch.nothing_left());
}

}  // namespace

TEST_CASE("PyTorch example: 2 workers train exactly like 1 worker on the same global batches",
          "[integration][examples][pytorch]") {
  check_exact_synchronisation(python_example());
}

TEST_CASE("LibTorch example: 2 workers train exactly like 1 worker on the same global batches",
          "[integration][examples][libtorch]") {
  check_exact_synchronisation(libtorch_example());
}

TEST_CASE("PyTorch example: a worker failure resumes from the checkpoint, no step lost or repeated",
          "[integration][examples][pytorch]") {
  check_worker_failure(python_example(), training_env());
}

TEST_CASE(
    "LibTorch example: a worker failure resumes from the checkpoint, no step lost or repeated",
    "[integration][examples][libtorch]") {
  check_worker_failure(libtorch_example(), training_env());
}

TEST_CASE("PyTorch example: after a node loss the survivor finishes at world size 2",
          "[integration][examples][pytorch][multinode]") {
  check_node_loss(python_example(), training_env());
}

TEST_CASE("LibTorch example: after a node loss the survivor finishes at world size 2",
          "[integration][examples][libtorch][multinode]") {
  check_node_loss(libtorch_example(), training_env());
}

TEST_CASE("PyTorch example: SIGTERM checkpoints, cohort exits 143, a new run resumes there",
          "[integration][examples][pytorch][signals]") {
  check_sigterm_resume(python_example());
}

TEST_CASE("LibTorch example: SIGTERM checkpoints, cohort exits 143, a new run resumes there",
          "[integration][examples][libtorch][signals]") {
  check_sigterm_resume(libtorch_example());
}
