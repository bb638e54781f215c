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

#include "tests/integration/multinode_support.hpp"

using namespace cohort::test;

namespace {

// One example program, as the words that follow cohort's own flags.
struct Example {
  std::string name;
  std::vector<std::string> program;
  std::vector<std::string> extra;  // example-specific training flags
  std::vector<std::string> fault;  // how the failure test makes a worker fail
};

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

std::vector<std::string> concat(std::vector<std::string> first,
                                const std::vector<std::string>& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

// `cohort run --standalone --nproc-per-node N FLAGS <example> <example extra> ARGS`, on loopback.
std::vector<std::string> single_node(const Example& example, int nproc,
                                     const std::vector<std::string>& flags,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> cohort_args{"--standalone", "--nproc-per-node", std::to_string(nproc)};
  cohort_args = concat(concat(concat(cohort_args, flags), example.program), example.extra);
  return loopback_only(Scratch::cohort_argv(concat(cohort_args, args)));
}

// One line of a --step-log: rank 0 appends "round step loss world_size" after every step.
struct StepRecord {
  int round = 0;
  int64_t step = 0;
  double loss = 0;
  int world_size = 0;
};

StepRecord parse_step(const std::string& line, bool* ok) {
  std::istringstream in(line);
  StepRecord record;
  in >> record.round >> record.step >> record.loss >> record.world_size;
  *ok = !in.fail();
  return record;
}

// The whole log of a finished run: every line must parse.
std::vector<StepRecord> read_step_log(const std::string& path) {
  std::vector<StepRecord> records;
  for (const std::string& line : split_lines(read_file(path))) {
    bool ok = false;
    records.push_back(parse_step(line, &ok));
    INFO("step log line '" << line << "'");
    REQUIRE(ok);
  }
  return records;
}

// The last complete line of a log that is still being written, if any.
std::optional<StepRecord> last_step(const std::string& path) {
  std::string text = read_file(path);
  if (text.empty() || text.back() != '\n') return std::nullopt;
  text.pop_back();
  bool ok = false;
  StepRecord record = parse_step(text.substr(text.rfind('\n') + 1), &ok);
  return ok ? std::optional<StepRecord>(record) : std::nullopt;
}

std::vector<StepRecord> of_round(const std::vector<StepRecord>& records, int round) {
  std::vector<StepRecord> selected;
  for (const auto& record : records) {
    if (record.round == round) selected.push_back(record);
  }
  return selected;
}

// The steps of `records`, in order, are exactly first, first + 1, ..., last.
bool consecutive(const std::vector<StepRecord>& records, int64_t first, int64_t last) {
  if (static_cast<int64_t>(records.size()) != last - first + 1) return false;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].step != first + static_cast<int64_t>(i)) return false;
  }
  return true;
}

std::string describe(const std::vector<StepRecord>& records) {
  std::ostringstream text;
  for (const auto& r : records) text << r.round << ":" << r.step << " ";
  return text.str();
}

// A run interrupted in round 0 and resumed in one later round. Checks that the resumed round
// starts at a checkpoint (`latest_only`: the latest one before the interruption), re-runs the
// steps after it exactly once, and ends at total - 1; that taking each step's last round gives
// 0..total-1 without gaps; and that a re-run step has the loss it had the first time (the same
// global batch from the same state: nothing was lost or applied twice). Returns the resumed
// round's records.
std::vector<StepRecord> check_resumed_once(const std::vector<StepRecord>& records, int64_t total,
                                           int64_t checkpoint_every, bool latest_only,
                                           double loss_tolerance) {
  INFO("step log: " << describe(records));
  std::set<int> rounds;
  for (const auto& record : records) rounds.insert(record.round);
  REQUIRE(rounds.size() == 2);
  REQUIRE(*rounds.begin() == 0);
  std::vector<StepRecord> failed = of_round(records, 0);
  std::vector<StepRecord> resumed = of_round(records, *rounds.rbegin());
  REQUIRE(!failed.empty());
  REQUIRE(!resumed.empty());
  const int64_t interrupted = failed.back().step + 1;  // the first step round 0 did not finish
  CHECK(consecutive(failed, 0, interrupted - 1));

  const int64_t resume = resumed.front().step;
  const int64_t latest = interrupted / checkpoint_every * checkpoint_every;
  CHECK(resume % checkpoint_every == 0);
  if (latest_only) {
    CHECK(resume == latest);
  } else {  // rank 0 may have died between logging a step and writing its checkpoint
    CHECK((resume == latest || resume == latest - checkpoint_every));
  }
  CHECK(resume <= interrupted);
  CHECK(consecutive(resumed, resume, total - 1));  // each step after the checkpoint once

  std::map<int64_t, StepRecord> final_sequence;  // step -> the last round that logged it
  for (const auto& record : records) final_sequence[record.step] = record;
  CHECK(static_cast<int64_t>(final_sequence.size()) == total);
  CHECK(final_sequence.begin()->first == 0);
  CHECK(final_sequence.rbegin()->first == total - 1);
  for (const auto& [step, record] : final_sequence) {
    CHECK(record.round == (step < resume ? 0 : *rounds.rbegin()));
  }

  for (const auto& again : resumed) {
    if (again.step >= interrupted || again.step >= static_cast<int64_t>(failed.size())) break;
    const StepRecord& first = failed[static_cast<size_t>(again.step)];
    INFO("step " << again.step << " first loss " << first.loss << ", re-run " << again.loss);
    CHECK(std::abs(first.loss - again.loss) <= loss_tolerance * std::max(1.0, first.loss));
  }
  return resumed;
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

// --- a worker failure -----------------------------------------------------------------------

void check_worker_failure(const Example& example) {
  Scratch scratch;
  const int64_t total = 30, checkpoint_every = 5, fail_at = 13;
  std::vector<std::string> fault =
      concat({"--fail-at-step", std::to_string(fail_at), "--fail-rank", "1"}, example.fault);
  std::vector<std::string> training{"--epochs",           "3",
                                    "--steps-per-epoch",  "10",
                                    "--checkpoint-every", std::to_string(checkpoint_every),
                                    "--checkpoint-dir",   scratch.file("checkpoints"),
                                    "--step-log",         scratch.file("steps.log")};
  RunResult result =
      scratch.run_argv(single_node(example, 2, {"--max-restarts", "1", "--shutdown-timeout", "10"},
                                   concat(training, fault)),
                       scratch.options(training_env()), 240s);
  INFO(result.out << result.err);
  REQUIRE(result.status.success());
  CHECK(contains(result.err, "injected failure at step 13"));
  CHECK(contains(result.out, "round 1: world size 2, resumed from " +
                                 scratch.file("checkpoints/checkpoint.pt") + " at step 10"));
  std::vector<StepRecord> records = read_step_log(scratch.file("steps.log"));
  // Rank 1 failed before step 13, so round 0 logged 0..12; round 1 re-ran 10..12 once, then on.
  std::vector<StepRecord> resumed =
      check_resumed_once(records, total, checkpoint_every, /*latest_only=*/true, 1e-6);
  CHECK(of_round(records, 0).back().step == fail_at - 1);
  CHECK(resumed.front().round == 1);
  CHECK(file_exists(scratch.file("checkpoints/checkpoint.pt")));
  CHECK(scratch.nothing_left());
}

// --- elastic node loss ----------------------------------------------------------------------

void check_node_loss(const Example& example) {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  const int64_t total = 100, checkpoint_every = 5;
  const double loss_threshold = 0.1;  // the untrained model's is 0.6-0.9
  const std::string step_log = scratch.file("steps.log");
  std::vector<std::string> training{"--epochs",
                                    "4",
                                    "--steps-per-epoch",
                                    "25",
                                    "--global-batch-size",
                                    "32",
                                    "--checkpoint-every",
                                    std::to_string(checkpoint_every),
                                    "--checkpoint-dir",
                                    scratch.file("checkpoints"),
                                    "--step-log",
                                    step_log,
                                    "--step-sleep",
                                    "0.05"};
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (std::string address : {"127.0.0.2", "127.0.0.3"}) {
    std::vector<std::string> args{"--nnodes",           "1:2",
                                  "--nproc-per-node",   "2",
                                  "--rdzv-id",          "examples",
                                  "--rdzv-backend",     "c10d",
                                  "--rdzv-endpoint",    cluster.endpoint(),
                                  "--local-addr",       address,
                                  "--rdzv-conf",        "last_call_timeout=5",
                                  "--shutdown-timeout", "10"};
    args = concat(concat(concat(args, example.program), example.extra), training);
    ChildOptions options = scratch.options(training_env());
    options.name = "node_" + address;
    nodes.push_back(std::make_unique<ChildProcess>(Scratch::cohort_argv(args), options));
  }
  // Mid-training in a round of both nodes (past a few checkpoints), kill the node of rank 0: the
  // survivor's new rank 0 must resume from the checkpoint the lost node wrote.
  auto trained_in_round0 = [&] {
    std::optional<StepRecord> last = last_step(step_log);
    return last && last->round == 0 && last->world_size == 4 && last->step >= 12;
  };
  bool reached = wait_until(trained_in_round0, 120s);
  INFO(nodes[0]->output() << nodes[1]->output());
  REQUIRE(reached);
  nodes[0]->signal(SIGKILL);
  nodes[0]->wait(10s);

  auto status = nodes[1]->wait(180s);
  INFO("survivor:\n" << nodes[1]->output());
  REQUIRE(status);
  CHECK(status->success());
  std::vector<StepRecord> records = read_step_log(step_log);
  for (const auto& record : of_round(records, 0)) CHECK(record.world_size == 4);
  // The same global batches at world size 2 give the same losses up to float rounding.
  std::vector<StepRecord> resumed =
      check_resumed_once(records, total, checkpoint_every, /*latest_only=*/false, 1e-4);
  for (const auto& record : resumed) CHECK(record.world_size == 2);
  CHECK(contains(nodes[1]->out(), "world size 2, resumed from"));
  double final_loss = resumed.back().loss;
  WARN(example.name << ": after the node loss the survivor resumed at step " << resumed.front().step
                    << " with world size 2; final loss " << final_loss
                    << " (first step's: " << records.front().loss << ")");
  CHECK(final_loss < loss_threshold);
  cluster.stop_daemon();
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
  check_worker_failure(python_example());
}

TEST_CASE(
    "LibTorch example: a worker failure resumes from the checkpoint, no step lost or repeated",
    "[integration][examples][libtorch]") {
  check_worker_failure(libtorch_example());
}

TEST_CASE("PyTorch example: after a node loss the survivor finishes at world size 2",
          "[integration][examples][pytorch][multinode]") {
  check_node_loss(python_example());
}

TEST_CASE("LibTorch example: after a node loss the survivor finishes at world size 2",
          "[integration][examples][libtorch][multinode]") {
  check_node_loss(libtorch_example());
}

TEST_CASE("PyTorch example: SIGTERM checkpoints, cohort exits 143, a new run resumes there",
          "[integration][examples][pytorch][signals]") {
  check_sigterm_resume(python_example());
}

TEST_CASE("LibTorch example: SIGTERM checkpoints, cohort exits 143, a new run resumes there",
          "[integration][examples][libtorch][signals]") {
  check_sigterm_resume(libtorch_example());
}
