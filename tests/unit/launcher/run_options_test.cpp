#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>

#include "launcher/gpu_count.hpp"
#include "launcher/run_options.hpp"

using namespace cohort;

namespace {

struct Parsed {
  RunOptions options;
  std::string command_error;
  ValidatedRun validated;
};

Parsed parse(std::vector<std::string> args) {
  Parsed parsed;
  CLI::App app;
  add_run_flags(app, parsed.options);
  args.insert(args.begin(), "run");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  parsed.command_error = take_command(app.remaining(), parsed.options);
  parsed.validated = validate_run_options(parsed.options);
  return parsed;
}

bool mentions(const std::vector<std::string>& problems, const std::string& flag) {
  for (const auto& problem : problems) {
    if (problem.find(flag) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("both spellings of a flag work", "[unit][launcher]") {
  CHECK(parse({"--nproc-per-node", "3", "train.py"}).validated.config.nproc == 3);
  CHECK(parse({"--nproc_per_node=4", "train.py"}).validated.config.nproc == 4);
  CHECK(parse({"--max_restarts", "2", "train.py"}).validated.config.env.max_restarts == 2);
}

TEST_CASE("the script and its arguments are passed through", "[unit][launcher]") {
  Parsed parsed = parse({"--nproc-per-node", "2", "train.py", "--lr", "0.1", "--nnodes", "9"});
  REQUIRE(parsed.validated.problems.empty());
  const AgentConfig& config = parsed.validated.config;
  CHECK(config.entrypoint_name == "train.py");
  CHECK(config.args == std::vector<std::string>{"-u", "train.py", "--lr", "0.1", "--nnodes", "9"});
}

TEST_CASE("-m runs a module", "[unit][launcher]") {
  Parsed parsed = parse({"-m", "pkg.train", "x"});
  CHECK(parsed.validated.config.args == std::vector<std::string>{"-u", "-m", "pkg.train", "x"});
}

TEST_CASE("--no-python runs the binary itself", "[unit][launcher]") {
  Parsed parsed = parse({"--no-python", "true", "a"});
  CHECK(parsed.validated.config.executable.find("/true") != std::string::npos);
  CHECK(parsed.validated.config.args == std::vector<std::string>{"a"});
}

TEST_CASE("PET_ variables give defaults that flags override", "[unit][launcher]") {
  ::setenv("PET_NPROC_PER_NODE", "5", 1);
  ::setenv("PET_STANDALONE", "1", 1);
  CHECK(parse({"train.py"}).validated.config.nproc == 5);
  CHECK(parse({"train.py"}).options.standalone);
  CHECK(parse({"--nproc-per-node", "2", "train.py"}).validated.config.nproc == 2);
  ::setenv("PET_STANDALONE", "0", 1);
  CHECK_FALSE(parse({"train.py"}).options.standalone);
  ::unsetenv("PET_NPROC_PER_NODE");
  ::unsetenv("PET_STANDALONE");
}

TEST_CASE("--standalone makes a random run id", "[unit][launcher]") {
  std::string first = parse({"--standalone", "t.py"}).validated.config.env.run_id;
  std::string second = parse({"--standalone", "t.py"}).validated.config.env.run_id;
  CHECK(first.size() == 36);
  CHECK(first != second);
  CHECK(parse({"t.py"}).validated.config.env.run_id == "none");
  CHECK(parse({"--rdzv-id", "job1", "t.py"}).validated.config.env.run_id == "job1");
}

TEST_CASE("bad values are reported with their flag", "[unit][launcher]") {
  CHECK(
      mentions(parse({"--nproc-per-node", "abc", "t.py"}).validated.problems, "--nproc-per-node"));
  CHECK(mentions(parse({"--nproc-per-node", "0", "t.py"}).validated.problems, "--nproc-per-node"));
  CHECK(mentions(parse({"--nnodes", "0", "t.py"}).validated.problems, "--nnodes"));
  CHECK(mentions(parse({"--nnodes", "3:2", "t.py"}).validated.problems, "--nnodes"));
  CHECK(mentions(parse({"--nnodes", "a:b:c", "t.py"}).validated.problems, "--nnodes"));
  CHECK(mentions(parse({"--redirects", "9", "t.py"}).validated.problems, "--redirects"));
  CHECK(mentions(parse({"--tee", "0:x", "t.py"}).validated.problems, "--tee"));
  CHECK(mentions(parse({"--rdzv-backend", "etcd", "t.py"}).validated.problems, "etcd"));
  CHECK(mentions(parse({"--signals-to-handle", "SIGFOO", "t.py"}).validated.problems,
                 "--signals-to-handle"));
  CHECK(mentions(parse({"--signals-to-handle", "SIGKILL", "t.py"}).validated.problems,
                 "--signals-to-handle"));
  CHECK(mentions(parse({"--local-ranks-filter", "a", "t.py"}).validated.problems,
                 "--local-ranks-filter"));
  // Ranks that do not fit an int are errors, not wrapped to small ranks.
  CHECK(mentions(parse({"--local-ranks-filter", "4294967296", "t.py"}).validated.problems,
                 "--local-ranks-filter"));
  CHECK(mentions(parse({"--tee", "4294967296:3", "t.py"}).validated.problems, "--tee"));
  CHECK(mentions(parse({"--monitor-interval", "0", "t.py"}).validated.problems,
                 "--monitor-interval"));
  CHECK(mentions(parse({"-m", "--no-python", "t.py"}).validated.problems, "--module"));
  CHECK(mentions(parse({"--master-port", "70000", "t.py"}).validated.problems, "--master-port"));
}

TEST_CASE("unknown flags and a missing script are errors", "[unit][launcher]") {
  CHECK(parse({"--bogus", "t.py"}).command_error.find("--bogus") != std::string::npos);
  CHECK(parse({}).command_error.find("missing the training script") != std::string::npos);
  CHECK(parse({"--", "-weird-name.py"}).command_error.empty());
}

TEST_CASE("USR1 is forwarded without stopping, TERM stops", "[unit][launcher]") {
  Parsed parsed = parse({"--signals-to-handle", "SIGTERM,SIGUSR1,usr2", "t.py"});
  REQUIRE(parsed.validated.problems.empty());
  CHECK(parsed.validated.config.extra_signals == std::vector<int>{SIGUSR1, SIGUSR2});
}

TEST_CASE("CUDA_VISIBLE_DEVICES filters the GPU count like CUDA", "[unit][launcher]") {
  CHECK(visible_gpu_count(4, nullptr) == 4);
  CHECK(visible_gpu_count(4, "") == 0);
  CHECK(visible_gpu_count(4, "0,2") == 2);
  CHECK(visible_gpu_count(4, "1,7,2") == 1);
  CHECK(visible_gpu_count(4, "-1") == 0);
  CHECK(visible_gpu_count(0, "GPU-6a2f,MIG-1234") == 2);
  CHECK(visible_gpu_count(2, " 0 , 1 ") == 2);
  CHECK(visible_gpu_count(0, "0") == 0);
}

TEST_CASE("the shutdown timeout comes from the flag or the environment", "[unit][launcher]") {
  CHECK(parse({"t.py"}).validated.config.shutdown_timeout == std::chrono::seconds(30));
  CHECK(parse({"--shutdown-timeout", "1.5", "t.py"}).validated.config.shutdown_timeout ==
        std::chrono::milliseconds(1500));
  ::setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7", 1);
  CHECK(parse({"t.py"}).validated.config.shutdown_timeout == std::chrono::seconds(7));
  for (const char* bad : {"1e300", "inf", "nan", "-2", "soon"}) {
    INFO(bad);
    ::setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", bad, 1);
    CHECK(mentions(parse({"t.py"}).validated.problems, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"));
  }
  ::unsetenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
  // Values that would overflow a duration are errors, not a garbage timeout.
  for (const char* bad : {"1e300", "inf", "nan", "31536001"}) {
    INFO(bad);
    CHECK(mentions(parse({"--shutdown-timeout", bad, "t.py"}).validated.problems,
                   "--shutdown-timeout"));
  }
  CHECK(parse({"--shutdown-timeout", "0", "t.py"}).validated.config.shutdown_timeout ==
        std::chrono::milliseconds(0));
}

TEST_CASE("inside a Slurm step, SLURM_* fills what the flags left unset",
          "[unit][launcher][slurm]") {
  RunOptions options;
  CLI::App app;
  add_run_flags(app, options);
  std::vector<std::string> args{"run", "--nnodes", "1:2", "t.py"};
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  std::vector<std::string> problems;
  std::vector<std::string> taken = apply_slurm_defaults(app, options,
                                                        {{"SLURM_JOB_ID", "77"},
                                                         {"SLURM_STEP_ID", "0"},
                                                         {"SLURM_JOB_NUM_NODES", "2"},
                                                         {"SLURM_JOB_NODELIST", "node[1-2]"},
                                                         {"SLURM_NODEID", "1"},
                                                         {"SLURM_GPUS_ON_NODE", "4"}},
                                                        problems);
  CHECK(problems.empty());
  CHECK(options.nnodes == "1:2");  // the command line wins
  CHECK(options.nproc_per_node == "4");
  CHECK(options.rdzv_id == "slurm-77.0");
  CHECK(options.rdzv_endpoint == "node1:29477");
  CHECK(options.rdzv_backend == "c10d");
  CHECK(options.node_rank == 1);
  CHECK(options.in_slurm_step);
  REQUIRE_FALSE(taken.empty());
  CHECK(taken[0] == "--nproc-per-node 4 from SLURM_GPUS_ON_NODE=4");
  // Slurm signals every process of the step: USR1/USR2 are caught, not forwarded a second time,
  // unless --signals-to-handle asks for it.
  options.command = {"t.py"};
  ValidatedRun validated = validate_run_options(options);
  CHECK(validated.config.absorbed_signals == std::vector<int>{SIGUSR1, SIGUSR2});
  CHECK(validated.config.extra_signals.empty());
  options.signals_to_handle = "SIGTERM,SIGUSR1";
  validated = validate_run_options(options);
  CHECK(validated.config.absorbed_signals == std::vector<int>{SIGUSR2});
  CHECK(validated.config.extra_signals == std::vector<int>{SIGUSR1});
}

TEST_CASE("an endpoint on this machine: an address is bound as given, a name on every address",
          "[unit][launcher]") {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  auto plan_for = [](const std::string& endpoint) {
    return parse({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "x.py"})
        .validated.daemon;
  };
  DaemonPlan by_name = plan_for(std::string(name) + ":29411");
  CHECK(by_name.embed == DaemonPlan::Embed::IfFree);
  CHECK(by_name.options.address == "0.0.0.0");
  CHECK(plan_for("127.0.0.1:29411").options.address == "127.0.0.1");
  CHECK(plan_for("localhost:29411").options.address == "127.0.0.1");
  CHECK(plan_for("192.0.2.77:29411").embed == DaemonPlan::Embed::No);  // not this machine
}
