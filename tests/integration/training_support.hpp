// The training examples' step logs, read back and checked (shared by the examples' tests on
// Debian 12's PyTorch and the torch2 tier's on PyTorch 2.6): a run interrupted and resumed must
// have lost and repeated no step. Also the worker-failure and node-loss scenarios both tiers run,
// and the LibTorch example built on its own (cmake -S examples/libtorch). Test thread only.
#pragma once

#include <algorithm>
#include <cmath>
#include <csignal>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "tests/integration/multinode_support.hpp"

namespace cohort::test {

// One example program, as the words that follow cohort's own flags.
struct Example {
  std::string name;
  std::vector<std::string> program;
  std::vector<std::string> extra;  // example-specific training flags
  std::vector<std::string> fault;  // how the failure test makes a worker fail
};

/// How a test starts a node's command line (identity when empty).
using NodeWrapper = std::function<std::vector<std::string>(const std::vector<std::string>&)>;

inline std::vector<std::string> concat(std::vector<std::string> first,
                                       const std::vector<std::string>& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

// One line of a --step-log: rank 0 appends "round step loss world_size" after every step.
struct StepRecord {
  int round = 0;
  int64_t step = 0;
  double loss = 0;
  int world_size = 0;
};

inline StepRecord parse_step(const std::string& line, bool* ok) {
  std::istringstream in(line);
  StepRecord record;
  in >> record.round >> record.step >> record.loss >> record.world_size;
  *ok = !in.fail();
  return record;
}

// The whole log of a finished run: every line must parse.
inline std::vector<StepRecord> read_step_log(const std::string& path) {
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
inline std::optional<StepRecord> last_step(const std::string& path) {
  std::string text = read_file(path);
  if (text.empty() || text.back() != '\n') return std::nullopt;
  text.pop_back();
  bool ok = false;
  StepRecord record = parse_step(text.substr(text.rfind('\n') + 1), &ok);
  return ok ? std::optional<StepRecord>(record) : std::nullopt;
}

inline std::vector<StepRecord> of_round(const std::vector<StepRecord>& records, int round) {
  std::vector<StepRecord> selected;
  for (const auto& record : records) {
    if (record.round == round) selected.push_back(record);
  }
  return selected;
}

// The steps of `records`, in order, are exactly first, first + 1, ..., last.
inline bool consecutive(const std::vector<StepRecord>& records, int64_t first, int64_t last) {
  if (static_cast<int64_t>(records.size()) != last - first + 1) return false;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].step != first + static_cast<int64_t>(i)) return false;
  }
  return true;
}

inline std::string describe(const std::vector<StepRecord>& records) {
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
inline std::vector<StepRecord> check_resumed_once(const std::vector<StepRecord>& records,
                                                  int64_t total, int64_t checkpoint_every,
                                                  bool latest_only, double loss_tolerance) {
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

// --- the LibTorch example built on its own ------------------------------------------------

/// `cmake -S examples/libtorch -B build_dir` and its build, warnings as errors, as one shell
/// command started through `wrap` (in the 2.6 root, with Gloo's headers hidden, ...). Returns the
/// program's path; a failed build fails the test with the build's output.
inline std::string build_libtorch_example(const Scratch& scratch, const std::string& build_dir,
                                          const NodeWrapper& wrap = {}) {
  const std::string script =
      "cmake -S \"$1/examples/libtorch\" -B \"$2\" -DCMAKE_CXX_FLAGS='-Wall -Wextra -Werror' "
      "&& cmake --build \"$2\" -j 2";
  std::vector<std::string> argv{"/bin/sh", "-c", script, "sh", kSourceDir, build_dir};
  RunResult result = scratch.run_argv(wrap ? wrap(argv) : argv, scratch.options(), 480s);
  INFO("the build of examples/libtorch:\n" << result.out << result.err);
  REQUIRE(result.status.success());
  REQUIRE(file_exists(build_dir + "/train_ddp"));
  return build_dir + "/train_ddp";
}

// --- a worker failure -----------------------------------------------------------------------

// 2 workers on one node (`cohort run --standalone`, loopback only), rank 1 failing at step 13 as
// `example.fault` says: cohort restarts the group once, round 1 resumes from the checkpoint of
// step 10, and every step is run once after it. `wrap` and `env` as for check_node_loss.
// Returns the run, for checks of its output.
inline RunResult check_worker_failure(const Example& example,
                                      const std::map<std::string, std::string>& env,
                                      const NodeWrapper& wrap = {}) {
  Scratch scratch;
  const int64_t total = 30, checkpoint_every = 5, fail_at = 13;
  std::vector<std::string> fault =
      concat({"--fail-at-step", std::to_string(fail_at), "--fail-rank", "1"}, example.fault);
  std::vector<std::string> training{"--epochs",           "3",
                                    "--steps-per-epoch",  "10",
                                    "--checkpoint-every", std::to_string(checkpoint_every),
                                    "--checkpoint-dir",   scratch.file("checkpoints"),
                                    "--step-log",         scratch.file("steps.log")};
  std::vector<std::string> args{
      "--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--shutdown-timeout", "10"};
  args = concat(concat(concat(concat(args, example.program), example.extra), training), fault);
  std::vector<std::string> argv = Scratch::cohort_argv(args);
  RunResult result =
      scratch.run_argv(loopback_only(wrap ? wrap(argv) : argv), scratch.options(env), 240s);
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
  return result;
}

// --- elastic node loss ----------------------------------------------------------------------

// `wrap` turns each node's command line into the one started (the identity, or one that runs it
// inside another root); `env` is added to the nodes' environment.
inline void check_node_loss(const Example& example, const std::map<std::string, std::string>& env,
                            const NodeWrapper& wrap = {}) {
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
    ChildOptions options = scratch.options(env);
    options.name = "node_" + address;
    std::vector<std::string> argv = Scratch::cohort_argv(args);
    nodes.push_back(std::make_unique<ChildProcess>(wrap ? wrap(argv) : argv, options));
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

}  // namespace cohort::test
