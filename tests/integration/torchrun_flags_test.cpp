// `cohort run` with the torchrun flags it used to refuse, end to end: the console line prefix
// with ${hostname} and ${pid}, --duplicate-*-filters' filtered files, --virtual-local-rank's
// environment, --event-log-handler console, TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, argparse-style
// abbreviations, --nproc-per-node with an accelerator name, and the flags accepted with a warning
// (--logs-specs; --numa-binding is real, run_binding_test.cpp). Real cohort binary and test_worker
// processes.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "common/event_log.hpp"
#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

const std::string kWorker = kTestWorkerBin;

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace

TEST_CASE("flag --log-line-prefix-template fills in ${hostname} and the worker's ${pid}",
          "[integration][run][torchrun]") {
  Scratch scratch;
  RunResult result = scratch.run({"--log_line_prefix_template", "${hostname}/${pid}/${rank}|",
                                  "--no-python", kWorker, "--pid-file", "pid", "--print", "hi"});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  std::string pid = read_file(scratch.file("pid"));
  CHECK(contains(result.out, host_name() + "/" + pid + "/0|hi\n"));
}

TEST_CASE("flag --duplicate-*-filters copy matching lines to the attempt's filtered files",
          "[integration][run][torchrun]") {
  Scratch scratch;
  std::string logs = scratch.file("logs");
  RunResult result = scratch.run({"--nproc-per-node",
                                  "2",
                                  "--log-dir",
                                  logs,
                                  "--rdzv-id",
                                  "dup",
                                  "--duplicate-stdout-filters",
                                  "loss,,x,nan",
                                  "--duplicate_stderr_filters",
                                  "NCCL",
                                  "--no-python",
                                  kWorker,
                                  "--print",
                                  "step ${local_rank} loss,x=1",
                                  "--print",
                                  "plain",
                                  "--stderr",
                                  "NCCL WARN ${local_rank}",
                                  "--stderr",
                                  "other"});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  std::string out = read_file(run_log_dir(logs, "dup") + "/attempt_0/filtered_stdout.log");
  std::string err = read_file(run_log_dir(logs, "dup") + "/attempt_0/filtered_stderr.log");
  INFO(out << err);
  CHECK(contains(out, "[default0]:step 0 loss,x=1\n"));
  CHECK(contains(out, "[default1]:step 1 loss,x=1\n"));
  CHECK_FALSE(contains(out, "plain"));
  CHECK(contains(err, "[default0]:NCCL WARN 0\n"));
  CHECK(contains(err, "[default1]:NCCL WARN 1\n"));
  CHECK_FALSE(contains(err, "other"));
  CHECK(contains(result.out, "[default0]:plain\n"));  // the console still gets everything
}

TEST_CASE("flag --virtual-local-rank: LOCAL_RANK=0 and one GPU per worker",
          "[integration][run][torchrun]") {
  Scratch scratch;
  RunResult result = scratch.run({"--nproc-per-node", "2", "--virtual-local-rank", "--no-python",
                                  kWorker, "--dump-env", "env_${local_rank}.json"},
                                 {{"CUDA_VISIBLE_DEVICES", "4,6"}});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  for (int local_rank = 0; local_rank < 2; ++local_rank) {
    EnvDump env = load_env(scratch.file("env_" + std::to_string(local_rank) + ".json"));
    CHECK(env_value(env, "LOCAL_RANK") == "0");
    CHECK(env_value(env, "RANK") == std::to_string(local_rank));
    CHECK(env_value(env, "CUDA_VISIBLE_DEVICES") == (local_rank == 0 ? "4" : "6"));
  }
}

// The events a run printed on stderr (--event-log-handler console): its JSON lines, by name.
std::vector<std::string> event_names(const std::string& err, const std::string& source) {
  std::vector<std::string> names;
  for (const nlohmann::json& event : cohort::parse_event_lines(err)) {
    if (event.value("source", "") == source) names.push_back(event.value("event", ""));
  }
  return names;
}

TEST_CASE("flag --event-log-handler console prints each event as a JSON line on stderr",
          "[integration][run][torchrun][events]") {
  Scratch scratch;
  SECTION("a run that succeeds") {
    RunResult result = scratch.run({"--event-log-handler", "console", "--rdzv-id", "ev",
                                    "--no-python", kWorker, "--print", "hi"});
    INFO(result.out << result.err);
    REQUIRE(result.status.shell_code() == 0);
    CHECK(event_names(result.err, "agent") ==
          std::vector<std::string>{"agent.started", "workers.started", "agent.finished"});
    std::vector<nlohmann::json> events = cohort::parse_event_lines(result.err);
    REQUIRE(events.size() == 3);
    CHECK(events[0]["run"] == "ev");
    CHECK(events[0]["nproc_per_node"] == 1);
    CHECK(events[1]["round"] == 0);
    CHECK(events[1]["ranks"] == nlohmann::json::array({0}));
    CHECK(events[2]["exit_code"] == 0);
  }
  SECTION("a worker that fails, a restart, and the end") {
    RunResult result = scratch.run({"--event-log-handler", "console", "--max-restarts", "1",
                                    "--no-python", kWorker, "--exit-code", "3"});
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 3);
    CHECK(event_names(result.err, "agent") ==
          std::vector<std::string>{"agent.started", "workers.started", "worker.failed",
                                   "workers.stopped", "workers.started", "worker.failed",
                                   "workers.stopped", "agent.finished"});
    std::vector<nlohmann::json> events = cohort::parse_event_lines(result.err);
    REQUIRE(events.size() == 8);
    CHECK(events[2]["status"] == "exit code 3");
    CHECK(events[4]["round"] == 1);
    CHECK(events[7]["exit_code"] == 3);
  }
  SECTION("null (the default) prints none") {
    RunResult result = scratch.run({"--no-python", kWorker});
    CHECK(cohort::parse_event_lines(result.err).empty());
  }
}

TEST_CASE("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 makes worker rank 0 host the store",
          "[integration][run][torchrun]") {
  Scratch scratch;
  RunResult result = scratch.run({"--no-python", kWorker, "--dump-env", "env.json"},
                                 {{"TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1"}});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  CHECK(env_value(load_env(scratch.file("env.json")), "TORCHELASTIC_USE_AGENT_STORE") == "False");
}

TEST_CASE(
    "flags may be abbreviated as argparse allows, an ambiguous prefix is an error, torchrun's flag "
    "wins",
    "[integration][run][torchrun]") {
  Scratch scratch;
  RunResult ok =
      scratch.run({"--nproc", "2", "--max", "0", "--no-python", kWorker, "--dump-env", "env.json"});
  INFO(ok.out << ok.err);
  REQUIRE(ok.status.shell_code() == 0);
  CHECK(env_value(load_env(scratch.file("env.json")), "LOCAL_WORLD_SIZE") == "2");
  RunResult ambiguous = scratch.run({"--ma", "1", "--no-python", kWorker});
  INFO(ambiguous.err);
  CHECK(ambiguous.status.shell_code() == 2);
  CHECK(contains(ambiguous.err, "ambiguous option: --ma could match"));
  CHECK(contains(ambiguous.err, "--master-port"));
}

TEST_CASE("flag --nproc-per-node xpu counts ZE_AFFINITY_MASK's devices",
          "[integration][run][torchrun]") {
  Scratch scratch;
  RunResult ok =
      scratch.run({"--nproc-per-node", "xpu", "--no-python", kWorker, "--dump-env", "env.json"},
                  {{"ZE_AFFINITY_MASK", "0.0,0.1,1"}});
  INFO(ok.out << ok.err);
  REQUIRE(ok.status.shell_code() == 0);
  CHECK(env_value(load_env(scratch.file("env.json")), "LOCAL_WORLD_SIZE") == "3");
  RunResult missing = scratch.run({"--nproc-per-node", "xpu", "--no-python", kWorker});
  CHECK(missing.status.shell_code() == 2);
  CHECK(contains(missing.err, "--nproc-per-node xpu"));
  CHECK(contains(missing.err, "ZE_AFFINITY_MASK"));
}

TEST_CASE("flag --logs-specs is accepted with one warning, --numa-binding needs a GPU",
          "[integration][run][torchrun]") {
  Scratch scratch;
  RunResult result =
      scratch.run({"--logs_specs", "custom", "--nproc-per-node", "2", "--no-python", kWorker});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  CHECK(occurrences(result.err, "--logs-specs custom") == 1);
  RunResult no_gpu = scratch.run({"--numa-binding", "node", "--no-python", kWorker},
                                 {{"COHORT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
  CHECK(no_gpu.status.shell_code() == 2);
  CHECK(contains(no_gpu.err, "--numa-binding node: no GPU found"));
  RunResult bad = scratch.run({"--numa-binding", "rack", "--no-python", kWorker});
  CHECK(bad.status.shell_code() == 2);
  CHECK(contains(bad.err, "--numa-binding"));
}
