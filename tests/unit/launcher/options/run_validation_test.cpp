#include "launcher/options/run_validation.hpp"

#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>
#include <csignal>

#include "tests/support/env_guard.hpp"

using namespace cohort;

namespace {

// A machine made up for the tests: 8 CPUs, `gpus` GPUs, python3 and true on PATH.
RunEnvironment test_machine(EnvMap env = {}, int gpus = 0) {
  RunEnvironment machine;
  machine.env = std::move(env);
  machine.host_name = "node7";
  machine.cpu_count = 8;
  machine.gpu_count = [gpus] { return gpus; };
  machine.find_executable = [](const std::string& name) -> std::string {
    if (name == "python3") return "/usr/bin/python3";
    if (name == "true" || name == "/bin/true") return "/bin/true";
    return "";
  };
  return machine;
}

RunOptions parse(std::vector<std::string> args) {
  RunOptions options;
  CLI::App app;
  add_run_flags(app, options);
  args.insert(args.begin(), "run");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  REQUIRE(take_command(app.remaining(), options).empty());
  return options;
}

// 2 NUMA nodes of 2 single-threaded cores (CPUs 0,2 | 1,3: numbered across nodes), one GPU on
// node 1.
RunEnvironment numa_machine(EnvMap env = {}) {
  RunEnvironment machine = test_machine(std::move(env), 1);
  machine.topology = [](std::string&) -> std::optional<MachineTopology> {
    MachineTopology topology;
    topology.pus = {{0, 0, 0, 0, 0}, {2, 1, 0, 0, 0}, {1, 2, 1, 1, 0}, {3, 3, 1, 1, 0}};
    topology.gpus = {{"0000:07:00.0", 1}};
    return topology;
  };
  return machine;
}

ValidatedRun validate(std::vector<std::string> args,
                      const RunEnvironment& machine = test_machine()) {
  return validate_run_options(parse(std::move(args)), machine);
}

bool mentions(const std::vector<std::string>& problems, const std::string& flag) {
  for (const auto& problem : problems) {
    if (problem.find(flag) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("the script runs through python -u with its arguments", "[unit][launcher]") {
  ValidatedRun run = validate({"--nproc-per-node", "2", "train.py", "--lr", "0.1"});
  REQUIRE(run.problems.empty());
  CHECK(run.config.nproc == 2);
  CHECK(run.config.entrypoint_name == "train.py");
  CHECK(run.config.executable == "/usr/bin/python3");
  CHECK(run.config.args == std::vector<std::string>{"-u", "train.py", "--lr", "0.1"});
  CHECK(run.config.host_name == "node7");
}

TEST_CASE("PYTHON_EXEC names the interpreter, without python3 on PATH the bare name is used",
          "[unit][launcher]") {
  CHECK(
      validate({"t.py"}, test_machine({{"PYTHON_EXEC", "/opt/py/bin/python"}})).config.executable ==
      "/opt/py/bin/python");
  RunEnvironment bare = test_machine();
  bare.find_executable = [](const std::string&) { return std::string(); };
  CHECK(validate({"t.py"}, bare).config.executable == "python3");
}

TEST_CASE("flag -m runs a module", "[unit][launcher]") {
  CHECK(validate({"-m", "pkg.train", "x"}).config.args ==
        std::vector<std::string>{"-u", "-m", "pkg.train", "x"});
}

TEST_CASE("flag --run-path runs the script's file in python, whatever -m and --no-python say",
          "[unit][launcher]") {
  // torchrun's --run-path beats --no-python (and -m): runpy.run_path(SCRIPT) in python.
  for (auto flags : {std::vector<std::string>{"--run-path", "--no-python", "t.py", "x"},
                     std::vector<std::string>{"--run-path", "-m", "t.py", "x"},
                     std::vector<std::string>{"--run-path", "-m", "--no-python", "t.py", "x"}}) {
    ValidatedRun run = validate(flags);
    INFO(flags.size());
    CHECK(run.problems.empty());
    CHECK(run.config.python_worker);
    CHECK(run.config.args == std::vector<std::string>{"-u", "t.py", "x"});
  }
}

TEST_CASE("flag --no-python runs the executable itself, found in PATH", "[unit][launcher]") {
  ValidatedRun run = validate({"--no-python", "true", "a"});
  REQUIRE(run.problems.empty());
  CHECK(run.config.executable == "/bin/true");
  CHECK(run.config.args == std::vector<std::string>{"a"});
  CHECK(validate({"--no-python", "nothing-here"}).problems ==
        std::vector<std::string>{"--no-python: 'nothing-here' is not an executable file in PATH"});
  CHECK(validate({"--no-python", "./nothing"}).problems ==
        std::vector<std::string>{"--no-python: './nothing' is not an executable file"});
}

TEST_CASE("a training script that is not here is refused before the node joins: a module is not",
          "[unit][launcher]") {
  RunEnvironment machine = test_machine();
  machine.path_exists = [](const std::string& path) { return path == "train.py"; };
  CHECK(validate({"train.py"}, machine).problems.empty());
  CHECK(validate({"trian.py", "--lr", "1"}, machine).problems ==
        std::vector<std::string>{"the training script 'trian.py' does not exist here (give -m for "
                                 "a module, --no-python for a program)"});
  CHECK(validate({"-m", "pkg.train"}, machine).problems.empty());       // python finds modules
  CHECK(validate({"--", "-c", "print(1)"}, machine).problems.empty());  // python's own flag
  machine.env["PYTHON_EXEC"] = "/usr/bin/python3";
  CHECK(mentions(validate({"trian.py"}, machine).problems, "'trian.py' does not exist"));
  // A $PYTHON_EXEC that is a wrapper may run python elsewhere (a container): its files.
  machine.env["PYTHON_EXEC"] = "/opt/bin/in-container";
  CHECK(validate({"trian.py"}, machine).problems.empty());
}

TEST_CASE("python named as the training script is refused: cohort starts python itself",
          "[unit][launcher]") {
  RunEnvironment machine = test_machine();
  machine.path_exists = [](const std::string&) { return true; };
  CHECK(validate({"python", "train.py"}, machine).problems ==
        std::vector<std::string>{"the training script is 'python': cohort starts the script with "
                                 "python itself, so drop it"});
  CHECK(validate({"/usr/bin/python3.11", "train.py"}, machine).problems.size() == 1);
  CHECK(validate({"python_tools.py"}, machine).problems.empty());
  CHECK(validate({"python3-config.py"}, machine).problems.empty());
  CHECK(validate({"-m", "python3"}, machine).problems.empty());  // a module of that name
  CHECK(validate({"--no-python", "python3", "train.py"}, machine).problems.empty());
}

TEST_CASE("flag --nproc-per-node cpu, gpu and auto count this machine's devices",
          "[unit][launcher]") {
  CHECK(validate({"--nproc-per-node", "cpu", "t.py"}).config.nproc == 8);
  CHECK(validate({"--nproc-per-node", "gpu", "t.py"}, test_machine({}, 4)).config.nproc == 4);
  CHECK(validate({"--nproc-per-node", "gpu", "t.py"},
                 test_machine({{"CUDA_VISIBLE_DEVICES", "0,2"}}, 4))
            .config.nproc == 2);
  CHECK(validate({"--nproc-per-node", "auto", "t.py"}, test_machine({}, 2)).config.nproc == 2);
  CHECK(validate({"--nproc-per-node", "auto", "t.py"}).config.nproc == 8);  // no GPU: CPUs
  CHECK(mentions(validate({"--nproc-per-node", "gpu", "t.py"}).problems,
                 "--nproc-per-node gpu: no GPU found"));
  CHECK(validate({"--nproc-per-node", "3", "t.py"}).config.env.local_world_size == 3);
}

TEST_CASE("a --standalone run with --nnodes 1:MAX runs one node as torchrun does",
          "[unit][launcher]") {
  ValidatedRun elastic = validate({"--standalone", "--nnodes=1:4", "t.py"});
  CHECK(elastic.problems.empty());
  CHECK(elastic.config.rendezvous.config.min_nodes == 1);
  CHECK(elastic.config.rendezvous.config.max_nodes == 1);  // no other node can reach it
  CHECK(elastic.daemon.embed == DaemonPlan::Embed::Yes);
  CHECK(elastic.notes == std::vector<std::string>{"--standalone: runs on one node; --nnodes 1:4 "
                                                  "taken as 1, as torchrun takes it"});
  CHECK(validate({"--standalone", "--nnodes=1", "t.py"}).notes.empty());
  CHECK(validate({"--standalone", "--nnodes=2:4", "t.py"}).problems ==
        std::vector<std::string>{"--standalone: runs on one node; drop --nnodes 2:4"});
}

TEST_CASE("an unknown rdzv-conf key is accepted with a warning naming it", "[unit][launcher]") {
  ValidatedRun run = validate({"--standalone", "--rdzv-conf", "foo=1,is_host=t", "t.py"});
  CHECK(run.problems.empty());
  CHECK(run.warnings == std::vector<std::string>{"--rdzv-conf: unknown key 'foo' ignored "
                                                 "(accepted, as torchrun accepts any key)"});
}

TEST_CASE("flag --standalone makes a random run id", "[unit][launcher]") {
  std::string first = validate({"--standalone", "t.py"}).config.env.run_id;
  std::string second = validate({"--standalone", "t.py"}).config.env.run_id;
  CHECK(first.size() == 36);
  CHECK(first != second);
  CHECK(validate({"t.py"}).config.env.run_id == "none");
  CHECK(validate({"--rdzv-id", "job1", "t.py"}).config.env.run_id == "job1");
}

TEST_CASE("a run id must be one plain path component of at most 128 characters",
          "[unit][launcher]") {
  CHECK(validate({"--rdzv-id", "exp_4.1", "t.py"}).problems.empty());
  CHECK(validate({"--rdzv-id", "slurm-12.0", "t.py"}).problems.empty());
  CHECK(validate({"--rdzv-id", "../../escape", "t.py"}).problems ==
        std::vector<std::string>{"--rdzv-id '../../escape': the run id contains '/'; only "
                                 "letters, digits and . _ - : @ are allowed"});
  CHECK(validate({"--rdzv-id", "", "t.py"}).problems ==
        std::vector<std::string>{"--rdzv-id '': the run id is empty"});
  std::vector<std::string> long_id =
      validate({"--rdzv-id", std::string(10240, 'x'), "t.py"}).problems;
  REQUIRE(long_id.size() == 1);
  CHECK(long_id[0] == "--rdzv-id '" + std::string(40, 'x') +
                          "...': the run id is 10240 characters long; at most 128 are allowed");
  CHECK(mentions(validate({"--rdzv-id", "a\x1b[2J", "t.py"}).problems, "--rdzv-id"));
  // --standalone's random id replaces whatever was given.
  CHECK(validate({"--standalone", "--rdzv-id", "", "t.py"}).problems.empty());
}

TEST_CASE("bad values are reported with their flag", "[unit][launcher]") {
  CHECK(mentions(validate({"--nproc-per-node", "abc", "t.py"}).problems, "--nproc-per-node"));
  CHECK(mentions(validate({"--nproc-per-node", "0", "t.py"}).problems, "--nproc-per-node"));
  CHECK(mentions(validate({"--nproc-per-node", "4097", "t.py"}).problems,
                 "--nproc-per-node: expected a number from 1 to 4096"));
  CHECK(validate({"--nproc-per-node", "4096", "t.py"}).problems.empty());
  CHECK(mentions(validate({"--nnodes", "0", "t.py"}).problems, "--nnodes"));
  CHECK(mentions(validate({"--nnodes", "3:2", "t.py"}).problems, "--nnodes"));
  CHECK(mentions(validate({"--nnodes", "a:b:c", "t.py"}).problems, "--nnodes"));
  CHECK(mentions(validate({"--redirects", "9", "t.py"}).problems, "--redirects"));
  CHECK(mentions(validate({"--tee", "0:x", "t.py"}).problems, "--tee"));
  CHECK(mentions(validate({"--rdzv-backend", "etcd", "t.py"}).problems, "etcd"));
  CHECK(mentions(validate({"--signals-to-handle", "SIGFOO", "t.py"}).problems,
                 "--signals-to-handle"));
  CHECK(mentions(validate({"--signals-to-handle", "SIGKILL", "t.py"}).problems,
                 "--signals-to-handle"));
  CHECK(mentions(validate({"--local-ranks-filter", "a", "t.py"}).problems, "--local-ranks-filter"));
  // Ranks that do not fit an int are errors, not wrapped to small ranks.
  CHECK(mentions(validate({"--local-ranks-filter", "4294967296", "t.py"}).problems,
                 "--local-ranks-filter"));
  CHECK(mentions(validate({"--tee", "4294967296:3", "t.py"}).problems, "--tee"));
  for (const char* bad : {"0", "-0.5", "nan", "inf", "-inf", "1e300"}) {
    INFO(bad);
    CHECK(mentions(validate({"--monitor-interval", bad, "t.py"}).problems, "--monitor-interval"));
  }
  CHECK(validate({"--monitor-interval", "0.5", "t.py"}).problems.empty());
  CHECK(mentions(validate({"-m", "--no-python", "t.py"}).problems, "--module"));
  CHECK(mentions(validate({"--master-port", "70000", "t.py"}).problems, "--master-port"));
  CHECK(mentions(validate({"--store-ports", "0-10", "t.py"}).problems, "--store-ports"));
  CHECK(mentions(validate({"--rdzv-conf", "join_timeout=soon", "t.py"}).problems, "--rdzv-conf"));
}

TEST_CASE("a --local-ranks-filter of no local rank here is said, and no error",
          "[unit][launcher]") {
  ValidatedRun none = validate({"--nproc-per-node", "2", "--local-ranks-filter", "5,2", "t.py"});
  CHECK(none.problems.empty());
  CHECK(mentions(none.warnings,
                 "--local-ranks-filter 5,2: no such local rank on this node "
                 "(--nproc-per-node 2)"));
  ValidatedRun some = validate({"--nproc-per-node", "2", "--local-ranks-filter", "5,1", "t.py"});
  CHECK_FALSE(mentions(some.warnings, "--local-ranks-filter"));
  CHECK_FALSE(mentions(validate({"--nproc-per-node", "2", "t.py"}).warnings, "--local-ranks"));
}

TEST_CASE("USR1 is forwarded without stopping, TERM stops", "[unit][launcher]") {
  ValidatedRun run = validate({"--signals-to-handle", "SIGTERM,SIGUSR1,usr2", "t.py"});
  REQUIRE(run.problems.empty());
  CHECK(run.config.extra_signals == std::vector<int>{SIGUSR1, SIGUSR2});
  CHECK(run.config.absorbed_signals.empty());
}

TEST_CASE("in a Slurm step USR1/USR2 are absorbed unless --signals-to-handle forwards them",
          "[unit][launcher][slurm]") {
  RunOptions options = parse({"t.py"});
  options.in_slurm_step = true;
  ValidatedRun run = validate_run_options(options, test_machine());
  CHECK(run.config.absorbed_signals == std::vector<int>{SIGUSR1, SIGUSR2});
  CHECK(run.config.extra_signals.empty());
  options.signals_to_handle = "SIGTERM,SIGUSR1";
  run = validate_run_options(options, test_machine());
  CHECK(run.config.absorbed_signals == std::vector<int>{SIGUSR2});
  CHECK(run.config.extra_signals == std::vector<int>{SIGUSR1});
}

TEST_CASE("the shutdown timeout comes from the flag or the environment", "[unit][launcher]") {
  CHECK(validate({"t.py"}).config.shutdown_timeout == std::chrono::seconds(30));
  CHECK(validate({"--shutdown-timeout", "1.5", "t.py"}).config.shutdown_timeout ==
        std::chrono::milliseconds(1500));
  CHECK(validate({"t.py"}, test_machine({{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}}))
            .config.shutdown_timeout == std::chrono::seconds(7));
  CHECK(validate({"--shutdown-timeout", "2", "t.py"},
                 test_machine({{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}}))
            .config.shutdown_timeout == std::chrono::seconds(2));
  for (const char* bad : {"1e300", "inf", "nan", "-2", "soon"}) {
    INFO(bad);
    CHECK(mentions(
        validate({"t.py"}, test_machine({{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", bad}})).problems,
        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"));
  }
  // Values that would overflow a duration are errors, not a garbage timeout.
  for (const char* bad : {"1e300", "inf", "-inf", "nan", "31536001", "-5", "-1"}) {
    INFO(bad);
    CHECK(mentions(validate({"--shutdown-timeout", bad, "t.py"}).problems, "--shutdown-timeout"));
  }
  // -1 is not a stand-in for the default any more: the flag given is the flag checked.
  CHECK(validate({"--shutdown-timeout", "-1", "t.py"},
                 test_machine({{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}}))
            .problems.size() == 1);
  CHECK(validate({"--shutdown-timeout", "0", "t.py"}).config.shutdown_timeout ==
        std::chrono::milliseconds(0));
}

TEST_CASE("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE sets the line prefix", "[unit][launcher]") {
  CHECK(validate({"t.py"}, test_machine({{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${rank}]"}}))
            .config.output.prefix_template == "[${rank}]");
  // Empty is unset, as for torchrun (an unset variable exported in a script): the default stays.
  CHECK(validate({"t.py"}, test_machine({{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", ""}}))
            .config.output.prefix_template == validate({"t.py"}).config.output.prefix_template);
  CHECK_FALSE(validate({"t.py"}).config.output.prefix_template.empty());
}

TEST_CASE("a --logs-specs of 'default', torchrun's own, warns of nothing", "[unit][launcher]") {
  CHECK(validate({"--logs-specs", "default", "t.py"}).warnings.empty());
  CHECK(validate({"--logs-specs", "mine", "t.py"}).warnings.size() == 1);
}

TEST_CASE("validate_run_flags checks the flags without a rendezvous endpoint or a script",
          "[unit][launcher]") {
  RunOptions options = parse({"--nnodes", "2", "--rdzv-backend", "c10d", "--store-ports",
                              "29500-29509", "--no-python", "gone"});
  CHECK(mentions(validate_run_options(options, test_machine()).problems, "--rdzv-endpoint"));
  ValidatedRun flags = validate_run_flags(options, test_machine());
  CHECK(flags.problems.empty());
  CHECK(flags.daemon.embed == DaemonPlan::Embed::No);
  CHECK(flags.daemon.options.store_port_min == 29500);
  CHECK(flags.daemon.options.store_port_max == 29509);
  CHECK(flags.config.rendezvous.config.max_nodes == 2);
  options.max_restarts = -1;
  CHECK(validate_run_flags(options, test_machine()).problems ==
        std::vector<std::string>{"--max-restarts: must be >= 0"});
}

TEST_CASE("flags --store-quota and --store-budget reach the daemon this agent hosts",
          "[unit][launcher]") {
  CHECK(validate({"t.py"}).daemon.options.store_quota_bytes == uint64_t{1} << 30);
  CHECK(validate({"t.py"}).daemon.options.store_budget_bytes == uint64_t{4} << 30);
  CHECK(validate({"--store-quota", "64K", "t.py"}).daemon.options.store_quota_bytes == 65536);
  CHECK(validate({"--store-budget", "2G", "t.py"}).daemon.options.store_budget_bytes == uint64_t{2}
                                                                                            << 30);
  for (const char* flag : {"--store-quota", "--store-budget"}) {
    for (const char* bad : {"0", "1T", "-1", "lots", ""}) {
      INFO(flag << " " << bad);
      CHECK(mentions(validate({flag, bad, "t.py"}).problems,
                     std::string(flag) + ": expected a positive number of bytes"));
    }
  }
}

TEST_CASE("flag --nproc-per-node with an accelerator counts its visible devices",
          "[unit][launcher]") {
  ValidatedRun xpu =
      validate({"--nproc-per-node", "xpu", "t.py"}, test_machine({{"ZE_AFFINITY_MASK", "0,1,2"}}));
  REQUIRE(xpu.problems.empty());
  CHECK(xpu.config.nproc == 3);
  ValidatedRun hpu = validate({"--nproc-per-node", "hpu", "t.py"},
                              test_machine({{"HABANA_VISIBLE_MODULES", "4,5"}}));
  REQUIRE(hpu.problems.empty());
  CHECK(hpu.config.nproc == 2);
  ValidatedRun unset = validate({"--nproc-per-node", "xpu", "t.py"});
  REQUIRE(unset.problems.size() == 1);
  CHECK(unset.problems[0].find("--nproc-per-node xpu") == 0);
  CHECK(unset.problems[0].find("ZE_AFFINITY_MASK") != std::string::npos);
  ValidatedRun unknown = validate({"--nproc-per-node", "tpu", "t.py"});
  REQUIRE(unknown.problems.size() == 1);
  CHECK(unknown.problems[0].find("--nproc-per-node") == 0);
  CHECK(unknown.problems[0].find("xpu") != std::string::npos);
}

TEST_CASE("torchrun flags cohort accepts without applying: validated, and a warning",
          "[unit][launcher]") {
  for (const char* mode : {"node", "socket", "exclusive", "core-complex"}) {
    ValidatedRun run = validate({"--numa-binding", mode, "t.py"}, numa_machine());
    CHECK(run.problems.empty());
    CHECK(run.warnings.empty());  // applied now
  }
  CHECK(mentions(validate({"--numa-binding", "cpu", "t.py"}).problems, "--numa-binding"));
  ValidatedRun specs = validate({"--logs-specs", "fancy", "t.py"});
  CHECK(specs.problems.empty());
  REQUIRE(specs.warnings.size() == 1);
  CHECK(specs.warnings[0].find("--logs-specs fancy") == 0);
  CHECK(validate({"t.py"}).warnings.empty());
}

TEST_CASE("flag --event-log-handler: null, console or dynamic_rendezvous", "[unit][launcher]") {
  CHECK_FALSE(validate({"t.py"}).config.console_events);
  CHECK(validate({"--event-log-handler", "console", "t.py"}).config.console_events);
  CHECK(validate({"--event-log-handler", "dynamic_rendezvous", "t.py"}).problems.empty());
  CHECK(mentions(validate({"--event-log-handler", "splunk", "t.py"}).problems,
                 "--event-log-handler"));
}

TEST_CASE("flag --virtual-local-rank needs a device per worker in CUDA_VISIBLE_DEVICES",
          "[unit][launcher]") {
  ValidatedRun run = validate({"--virtual-local-rank", "--nproc-per-node", "2", "t.py"});
  REQUIRE(run.problems.empty());
  CHECK(run.config.env.virtual_local_rank);
  CHECK(validate({"--virtual-local-rank", "--nproc-per-node", "2", "t.py"},
                 test_machine({{"CUDA_VISIBLE_DEVICES", "5,7"}}))
            .problems.empty());
  CHECK(mentions(validate({"--virtual-local-rank", "--nproc-per-node", "3", "t.py"},
                          test_machine({{"CUDA_VISIBLE_DEVICES", "5,7"}}))
                     .problems,
                 "--virtual-local-rank"));
}

TEST_CASE("the line prefix: the flag, else TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",
          "[unit][launcher]") {
  RunEnvironment machine = test_machine({{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "env:"}});
  CHECK(validate({"t.py"}, machine).config.output.prefix_template == "env:");
  CHECK(validate({"--log-line-prefix-template", "${hostname}:", "t.py"}, machine)
            .config.output.prefix_template == "${hostname}:");
}

TEST_CASE("flag --duplicate-*-filters become filter lists, not with --raw-output",
          "[unit][launcher]") {
  ValidatedRun run = validate({"--duplicate-stdout-filters", "loss,,acc,nan",
                               "--duplicate-stderr-filters", "NCCL", "t.py"});
  REQUIRE(run.problems.empty());
  CHECK(run.config.output.stdout_filters == std::vector<std::string>{"loss,acc", "nan"});
  CHECK(run.config.output.stderr_filters == std::vector<std::string>{"NCCL"});
  CHECK(mentions(validate({"--duplicate-stdout-filters", "x", "--raw-output", "t.py"}).problems,
                 "--duplicate-stdout-filters"));
}

TEST_CASE("flag --hang-timeout: off by default, first allowance 10 x, both spellings, validated",
          "[unit][launcher][hang]") {
  using namespace std::chrono_literals;
  CHECK_FALSE(validate({"t.py"}).config.hang.enabled());
  ValidatedRun run = validate({"--hang-timeout", "2.5", "t.py"});
  REQUIRE(run.problems.empty());
  CHECK(run.config.hang.timeout == 2500ms);
  CHECK(run.config.hang.first_timeout == 25s);
  run = validate({"--hang_timeout", "3", "--hang_first_timeout", "60", "t.py"});
  REQUIRE(run.problems.empty());
  CHECK(run.config.hang.timeout == 3s);
  CHECK(run.config.hang.first_timeout == 60s);
  CHECK(mentions(validate({"--hang-timeout", "-1", "t.py"}).problems, "--hang-timeout"));
  CHECK(mentions(validate({"--hang-timeout", "1", "--hang-first-timeout", "0", "t.py"}).problems,
                 "--hang-first-timeout"));
  CHECK(mentions(validate({"--hang-first-timeout", "5", "t.py"}).problems, "--hang-first-timeout"));
}

TEST_CASE("PET_HANG_TIMEOUT sets --hang-timeout", "[unit][launcher][hang]") {
  test::EnvGuard env;
  env.set("PET_HANG_TIMEOUT", "4");
  CHECK(validate({"t.py"}).config.hang.timeout == std::chrono::seconds(4));
}

TEST_CASE("flag --hang-dump-timeout: 10 s by default, 0 does not wait, PET_, validated",
          "[unit][launcher][hang]") {
  using namespace std::chrono_literals;
  CHECK(validate({"t.py"}).config.hang.dump_timeout == 10s);
  ValidatedRun run = validate({"--hang-dump-timeout", "2.5", "t.py"});
  REQUIRE(run.problems.empty());
  CHECK(run.config.hang.dump_timeout == 2500ms);
  CHECK(validate({"--hang_dump_timeout", "0", "t.py"}).config.hang.dump_timeout == 0s);
  for (const char* bad : {"-1", "3601", "nan"}) {
    INFO(bad);
    CHECK(mentions(validate({"--hang-dump-timeout", bad, "t.py"}).problems, "--hang-dump-timeout"));
  }
  test::EnvGuard env;
  env.set("PET_HANG_DUMP_TIMEOUT", "4");
  CHECK(validate({"t.py"}).config.hang.dump_timeout == 4s);
}

TEST_CASE("flag --straggler-factor: 1.5 by default, PET_STRAGGLER_FACTOR, validated",
          "[unit][launcher][straggler]") {
  CHECK(validate({"t.py"}).config.straggler_factor_pct == 150);
  ValidatedRun run = validate({"--straggler-factor", "2.25", "t.py"});
  REQUIRE(run.problems.empty());
  CHECK(run.config.straggler_factor_pct == 225);
  for (const char* bad : {"1", "0.5", "-2", "1001", "nan"}) {
    INFO(bad);
    CHECK(mentions(validate({"--straggler-factor", bad, "t.py"}).problems, "--straggler-factor"));
  }
  test::EnvGuard env;
  env.set("PET_STRAGGLER_FACTOR", "3");
  CHECK(validate({"t.py"}).config.straggler_factor_pct == 300);
}

TEST_CASE("binding flags: the plan reaches the agent config, bad plans name the flags",
          "[unit][launcher][binding]") {
  ValidatedRun bound =
      validate({"--nproc-per-node", "1", "--numa-binding", "node", "--report-bindings", "t.py"},
               numa_machine());
  REQUIRE(bound.problems.empty());
  CHECK(bound.config.report_bindings);
  REQUIRE(bound.config.bindings.size() == 1);
  CHECK(bound.config.bindings[0].gpu == 0);
  CHECK(bound.config.bindings[0].cpu.cpus == std::vector<int>{1, 3});
  CHECK(bound.config.bindings[0].cpu.numa_nodes == std::vector<int>{1});
  ValidatedRun cores =
      validate({"--nproc-per-node", "2", "--cpu-bind", "cores", "t.py"}, numa_machine());
  REQUIRE(cores.config.bindings.size() == 2);
  CHECK(cores.config.bindings[0].cpu.cpus == std::vector<int>{0, 2});
  CHECK(cores.config.bindings[1].cpu.cpus == std::vector<int>{1, 3});
  CHECK(mentions(
      validate({"--nproc-per-node", "5", "--cpu-bind", "cores", "t.py"}, numa_machine()).problems,
      "--cpu-bind cores: 5 workers (--nproc-per-node) but 4 cores"));
  CHECK(mentions(
      validate({"--nproc-per-node", "2", "--numa-binding", "socket", "t.py"}, numa_machine())
          .problems,
      "--numa-binding socket: 2 workers (--nproc-per-node) but 1 GPUs visible"));
  CHECK(mentions(
      validate({"--numa-binding", "node", "--cpu-bind", "cores", "t.py"}, numa_machine()).problems,
      "--cpu-bind: not with --numa-binding"));
  CHECK(mentions(validate({"--cpu-bind", "all", "t.py"}).problems, "--cpu-bind: expected none"));
  CHECK(mentions(validate({"--numa-binding", "node", "t.py"}).problems,
                 "--numa-binding node: no topology"));
  CHECK(validate({"--nproc-per-node", "2", "t.py"}, numa_machine()).config.bindings.empty());
}

TEST_CASE("the built-in GPU checks cover the GPUs the node may use", "[unit][launcher]") {
  ValidatedRun all = validate({"train.py"}, test_machine({}, 4));
  REQUIRE(all.config.gpu_health.enabled());  // the agent turns them off when NVML sees no GPU
  CHECK(all.config.gpu_health.visible(4) == std::vector<int>{0, 1, 2, 3});
  CHECK(all.config.gpu_health.reclaim_timeout == std::chrono::seconds(30));
  ValidatedRun some = validate({"--gpu-reclaim-timeout", "2.5", "train.py"},
                               test_machine({{"CUDA_VISIBLE_DEVICES", "3,1"}}, 4));
  CHECK(some.config.gpu_health.visible(4) == std::vector<int>{3, 1});
  CHECK(some.config.gpu_health.reclaim_timeout == std::chrono::milliseconds(2500));
  ValidatedRun by_uuid =
      validate({"train.py"}, test_machine({{"CUDA_VISIBLE_DEVICES", "GPU-1"}}, 2));
  CHECK(by_uuid.config.gpu_health.visible(2) == std::vector<int>{0, 1});
  ValidatedRun bad = validate({"--gpu-reclaim-timeout", "-1", "train.py"});
  CHECK(mentions(bad.problems, "--gpu-reclaim-timeout"));
}

TEST_CASE("a number of workers is validated without asking NVML", "[unit][launcher]") {
  RunEnvironment machine = test_machine({}, 4);
  int asked = 0;
  machine.gpu_count = [&asked] { return ++asked, 4; };
  ValidatedRun run = validate({"--nproc-per-node", "8", "train.py"}, machine);
  CHECK(run.problems.empty());
  CHECK(asked == 0);  // the slow part of NVML is the agent's, off the launch path
  validate({"--nproc-per-node", "gpu", "train.py"}, machine);
  CHECK(asked == 1);
}

TEST_CASE("PYTHON_EXEC naming an interpreter without a path is found in PATH", "[unit][launcher]") {
  CHECK(validate({"train.py"}, test_machine({{"PYTHON_EXEC", "python3"}})).config.executable ==
        "/usr/bin/python3");
  CHECK(validate({"train.py"}, test_machine({{"PYTHON_EXEC", "/opt/py/bin/python"}}))
            .config.executable == "/opt/py/bin/python");
  CHECK(validate({"train.py"}).config.executable == "/usr/bin/python3");
}
