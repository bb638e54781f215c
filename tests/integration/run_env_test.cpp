// `cohort run` on one node: the environment every worker gets, and how --nproc-per-node is read
// (both spellings, PET_NPROC_PER_NODE, cpu, gpu). Real cohort, real test_worker processes.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>

#include "common/nvml.hpp"
#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

const std::string kWorker = kTestWorkerBin;

// Dumps of local ranks 0..count-1, and proof that there is no dump for local rank `count`.
std::vector<EnvDump> load_dumps(const Scratch& scratch, int count) {
  std::vector<EnvDump> dumps;
  for (int local_rank = 0; local_rank < count; ++local_rank) {
    dumps.push_back(load_env(scratch.file("env_" + std::to_string(local_rank) + ".json")));
  }
  CHECK_FALSE(file_exists(scratch.file("env_" + std::to_string(count) + ".json")));
  return dumps;
}

std::vector<std::string> dump_args() {
  return {"--no-python", kWorker, "--dump-env", "env_${local_rank}.json"};
}

std::vector<std::string> with(std::vector<std::string> flags,
                              const std::vector<std::string>& tail) {
  flags.insert(flags.end(), tail.begin(), tail.end());
  return flags;
}

}  // namespace

TEST_CASE("every worker gets torchrun's environment", "[integration][run][env]") {
  Scratch scratch;
  RunResult result = scratch.run(
      with({"--nproc-per-node", "3", "--rdzv-id", "env-run", "--max-restarts", "4"}, dump_args()));
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  std::vector<EnvDump> dumps = load_dumps(scratch, 3);
  std::set<std::string> pids;
  for (int local_rank = 0; local_rank < 3; ++local_rank) {
    const EnvDump& env = dumps[local_rank];
    const std::string lr = std::to_string(local_rank);
    INFO("local rank " << lr);
    CHECK(env_value(env, "LOCAL_RANK") == lr);
    CHECK(env_value(env, "RANK") == lr);
    CHECK(env_value(env, "GROUP_RANK") == "0");
    CHECK(env_value(env, "ROLE_RANK") == lr);
    CHECK(env_value(env, "ROLE_NAME") == "default");
    CHECK(env_value(env, "LOCAL_WORLD_SIZE") == "3");
    CHECK(env_value(env, "WORLD_SIZE") == "3");
    CHECK(env_value(env, "GROUP_WORLD_SIZE") == "1");
    CHECK(env_value(env, "ROLE_WORLD_SIZE") == "3");
    CHECK(env_value(env, "MASTER_ADDR") == "127.0.0.1");
    CHECK(is_port(env_value(env, "MASTER_PORT")));
    CHECK(env_value(env, "MASTER_PORT") == env_value(dumps[0], "MASTER_PORT"));
    CHECK(env_value(env, "TORCHELASTIC_RESTART_COUNT") == "0");
    CHECK(env_value(env, "TORCHELASTIC_MAX_RESTARTS") == "4");
    CHECK(env_value(env, "TORCHELASTIC_RUN_ID") == "env-run");
    // The run's worker store (DESIGN.md §2) is up before the workers start: they are clients.
    CHECK(env_value(env, "TORCHELASTIC_USE_AGENT_STORE") == "True");
    CHECK(contains(env_value(env, "TORCHELASTIC_ERROR_FILE"), "/env-run_"));
    CHECK(ends_with(env_value(env, "TORCHELASTIC_ERROR_FILE"), "/attempt_0/" + lr + "/error.json"));
    CHECK(env_value(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
    CHECK(env_value(env, "OMP_NUM_THREADS") == "1");
    CHECK(env_value(env, "__stdin") == "/dev/null");
    pids.insert(env_value(env, "__pid"));
  }
  CHECK(pids.size() == 3);
  CHECK(scratch.nothing_left());
}

TEST_CASE("flag --role and --local-addr reach the workers, inherited values are kept",
          "[integration][run][env]") {
  Scratch scratch;
  RunResult result =
      scratch.run(with({"--nproc-per-node", "2", "--role", "trainer", "--local-addr", "127.0.0.5"},
                       dump_args()),
                  {{"OMP_NUM_THREADS", "4"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  std::vector<EnvDump> dumps = load_dumps(scratch, 2);
  for (const EnvDump& env : dumps) {
    CHECK(env_value(env, "ROLE_NAME") == "trainer");
    CHECK(env_value(env, "MASTER_ADDR") == "127.0.0.5");
    CHECK(is_port(env_value(env, "MASTER_PORT")));
    CHECK(env_value(env, "OMP_NUM_THREADS") == "4");
    CHECK(env_value(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING") == "0");
    CHECK(env_value(env, "TORCHELASTIC_RUN_ID") == "none");  // torchrun's --rdzv-id default
  }
  CHECK(env_value(dumps[0], "MASTER_PORT") == env_value(dumps[1], "MASTER_PORT"));
  CHECK_FALSE(contains(result.err, "OMP_NUM_THREADS=1"));  // no warning: the user set it
  CHECK(scratch.nothing_left());
}

TEST_CASE("flag --worker-store rank0: worker rank 0 hosts the store, as with torchrun 1.13",
          "[integration][run][env]") {
  Scratch scratch;
  RunResult result =
      scratch.run(with({"--nproc-per-node", "2", "--worker-store", "rank0"}, dump_args()));
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  for (const EnvDump& env : load_dumps(scratch, 2)) {
    CHECK(env_value(env, "TORCHELASTIC_USE_AGENT_STORE") == "False");
    CHECK(is_port(env_value(env, "MASTER_PORT")));
  }
}

TEST_CASE("one worker gets no OMP_NUM_THREADS", "[integration][run][env]") {
  Scratch scratch;
  RunResult result = scratch.run(with({"--nproc-per-node", "1"}, dump_args()));
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  EnvDump env = load_dumps(scratch, 1)[0];
  CHECK(env_value(env, "OMP_NUM_THREADS") == "<unset>");
  CHECK(env_value(env, "WORLD_SIZE") == "1");
}

TEST_CASE("flag --standalone makes a random uuid-like run id per run", "[integration][run][env]") {
  Scratch scratch;
  std::vector<std::string> ids;
  for (int run = 0; run < 2; ++run) {
    RunResult result = scratch.run(with({"--standalone", "--nproc-per-node", "2"}, dump_args()));
    INFO(result.out << result.err);
    REQUIRE(result.status.shell_code() == 0);
    std::vector<EnvDump> dumps = load_dumps(scratch, 2);
    std::string id = env_value(dumps[0], "TORCHELASTIC_RUN_ID");
    CHECK(is_uuid_like(id));
    CHECK(env_value(dumps[1], "TORCHELASTIC_RUN_ID") == id);
    CHECK(contains(env_value(dumps[1], "TORCHELASTIC_ERROR_FILE"), "/" + id + "_"));
    CHECK(ends_with(env_value(dumps[1], "TORCHELASTIC_ERROR_FILE"), "/attempt_0/1/error.json"));
    ids.push_back(id);
  }
  CHECK(ids[0] != ids[1]);
}

TEST_CASE("workers read /dev/null, not cohort's stdin", "[integration][run][env]") {
  Scratch scratch;
  std::ofstream(scratch.file("input.txt")) << "not for the workers\n";
  // cohort's own stdin is a regular file here (the shell redirects it, then execs cohort).
  std::vector<std::string> argv{"/bin/sh", "-c", "exec \"$0\" \"$@\" < input.txt"};
  for (const auto& arg : Scratch::cohort_argv(with({"--nproc-per-node", "2"}, dump_args()))) {
    argv.push_back(arg);
  }
  RunResult result = scratch.run_argv(argv, scratch.options());
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  for (const EnvDump& env : load_dumps(scratch, 2)) CHECK(env_value(env, "__stdin") == "/dev/null");
}

TEST_CASE("flag --nproc-per-node: both spellings, PET_NPROC_PER_NODE, and the command line wins",
          "[integration][run][env]") {
  struct Case {
    std::vector<std::string> flags;
    std::map<std::string, std::string> env;
    int workers;
  };
  const std::vector<Case> cases{
      {{"--nproc_per_node=2"}, {}, 2},
      {{"--nproc-per-node", "2"}, {}, 2},
      {{"--nproc-per-node=3"}, {}, 3},
      {{}, {{"PET_NPROC_PER_NODE", "2"}}, 2},
      {{"--nproc-per-node", "3"}, {{"PET_NPROC_PER_NODE", "2"}}, 3},
      {{"--nproc_per_node", "1"}, {{"PET_NPROC_PER_NODE", "2"}}, 1},
  };
  for (const Case& c : cases) {
    Scratch scratch;
    RunResult result = scratch.run(with(c.flags, dump_args()), c.env);
    INFO(Catch::Detail::stringify(c.flags) << " env " << Catch::Detail::stringify(c.env) << "\n"
                                           << result.out << result.err);
    REQUIRE(result.status.shell_code() == 0);
    std::vector<EnvDump> dumps = load_dumps(scratch, c.workers);
    for (const EnvDump& env : dumps) {
      CHECK(env_value(env, "LOCAL_WORLD_SIZE") == std::to_string(c.workers));
      CHECK(env_value(env, "WORLD_SIZE") == std::to_string(c.workers));
    }
  }
}

TEST_CASE("flag --nproc-per-node cpu starts one worker per online CPU", "[integration][run][env]") {
  Scratch scratch;
  int cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  RunResult result = scratch.run(with({"--nproc-per-node", "cpu"}, dump_args()));
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  std::vector<EnvDump> dumps = load_dumps(scratch, cpus);
  CHECK(env_value(dumps[0], "LOCAL_WORLD_SIZE") == std::to_string(cpus));
}

TEST_CASE("flag --nproc-per-node gpu without a GPU is a usage error naming the flag",
          "[integration][run][env]") {
  Scratch scratch;
  std::vector<std::map<std::string, std::string>> environments{{{"CUDA_VISIBLE_DEVICES", ""}}};
  if (cohort::nvml_device_count().value_or(0) == 0) {
    environments.push_back({});  // no NVML or no device: CUDA_VISIBLE_DEVICES need not say so
  } else {
    WARN("this machine has a GPU: only the CUDA_VISIBLE_DEVICES=\"\" case runs");
  }
  for (const auto& env : environments) {
    RunResult result = scratch.run(with({"--nproc-per-node", "gpu"}, dump_args()), env);
    INFO(Catch::Detail::stringify(env) << "\n" << result.out << result.err);
    CHECK(result.status.shell_code() == 2);
    CHECK(contains(result.err, "--nproc-per-node"));
    CHECK_FALSE(file_exists(scratch.file("env_0.json")));  // nothing was started
  }
}

TEST_CASE(
    "with --hang-timeout the flight recorder's dump stem goes under the name the workers' "
    "torch reads",
    "[integration][run][env][hang]") {
  require_torch();  // Debian 12's python3-torch: PyTorch 1.13, which reads only the older name
  Scratch scratch;
  std::string script = scratch.file("dump_env.py");
  std::ofstream(script) << "import json, os, sys\n"
                           "json.dump(dict(os.environ), open(sys.argv[1], 'w'))\n";
  RunResult python = scratch.run({"--nproc-per-node", "1", "--hang-timeout", "60", "--log-dir",
                                  "logs", script, "env_${local_rank}.json"},
                                 {{"PYTHON_EXEC", kPython}});
  INFO(python.out << python.err);
  REQUIRE(python.status.shell_code() == 0);
  EnvDump env = load_env(scratch.file("env_0.json"));
  CHECK(contains(env_value(env, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"), "/attempt_0/nccl_trace_rank_"));
  CHECK(env_value(env, "TORCH_FR_DUMP_TEMP_FILE") == "<unset>");
  CHECK(env_value(env, "NCCL_ASYNC_ERROR_HANDLING") == "1");

  // A --no-python worker's torch is unknown: both names, so that its dump is kept either way.
  RunResult native = scratch.run(
      with({"--nproc-per-node", "1", "--hang-timeout", "60", "--log-dir", "logs"}, dump_args()));
  INFO(native.out << native.err);
  REQUIRE(native.status.shell_code() == 0);
  env = load_env(scratch.file("env_0.json"));
  std::string stem = env_value(env, "TORCH_FR_DUMP_TEMP_FILE");
  CHECK(contains(stem, "/attempt_0/nccl_trace_rank_"));
  CHECK(env_value(env, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE") == stem);
  CHECK(scratch.nothing_left());
}

TEST_CASE("a --no-python worker's argv[0] is the program as given, as torchrun passes it",
          "[integration][run][env]") {
  Scratch scratch;
  // $$$$ is the shell's own $$ (the script's arguments are expanded as torchrun expands them).
  RunResult result = scratch.run({"--nproc-per-node", "1", "--no-python", "sh", "-c",
                                  "tr '\\0' ' ' < /proc/$$$$/cmdline > " + scratch.file("argv")});
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  CHECK(read_file(scratch.file("argv")).rfind("sh -c tr ", 0) == 0);
}
