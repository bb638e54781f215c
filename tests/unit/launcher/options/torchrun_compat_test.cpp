// torchrun's own argument tests as a compatibility suite: the command lines (and PET_*
// environments) that PyTorch's test/distributed/launcher/run_test.py and argparse_util_test.py
// give torch.distributed.run, each parsed and validated by cohort run's parser, with what torchrun
// makes of it: the worker count, the nodes, the rendezvous, the script's words, or the error.
#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>
#include <functional>

#include "launcher/options/flag_abbreviations.hpp"
#include "launcher/options/run_validation.hpp"
#include "tests/support/env_guard.hpp"

using namespace cohort;

namespace {

struct Outcome {
  std::string parse_error;  ///< from the abbreviation pass, CLI11 or take_command
  ValidatedRun run;
};

RunEnvironment machine(int gpus) {
  RunEnvironment machine;
  machine.host_name = "node0";
  machine.cpu_count = 8;
  machine.gpu_count = [gpus] { return gpus; };
  machine.find_executable = [](const std::string& name) -> std::string {
    if (name == "python3") return "/usr/bin/python3";
    if (name.find("test_script.sh") != std::string::npos) return name;
    return "";
  };
  machine.is_local_host = [](const std::string& host) {
    return host == "localhost" || host == "127.0.0.1";
  };
  return machine;
}

// What `torchrun ARGS` becomes in cohort run, PET_* variables set from `env` meanwhile.
Outcome run_args(std::vector<std::string> args, const std::map<std::string, std::string>& env,
                 int gpus) {
  test::EnvGuard guard;
  for (const auto& [name, value] : env) guard.set(name, value);
  Outcome outcome;
  RunOptions options;
  CLI::App app;
  add_run_flags(app, options);
  ExpandedWords expanded = expand_abbreviations(args, flag_specs(app));
  if (!expanded.error.empty()) return {expanded.error, {}};
  expanded.words.insert(expanded.words.begin(), "run");
  std::vector<char*> argv;
  for (auto& word : expanded.words) argv.push_back(word.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& error) {
    return {error.what(), {}};
  }
  outcome.parse_error = take_command(app.remaining(), options);
  if (outcome.parse_error.empty()) outcome.run = validate_run_options(options, machine(gpus));
  return outcome;
}

struct Case {
  std::string from;  ///< the torchrun test it comes from
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  int gpus = 0;
  std::string error;  ///< empty: valid; else text the first problem (or parse error) contains
  std::function<void(const ValidatedRun&)> check = [](const ValidatedRun&) {};
};

const std::string kScript = "/pt/test/distributed/launcher/bin/test_script.py";
const std::string kShell = "/pt/test/distributed/launcher/bin/test_script.sh";

std::vector<std::string> script_args(const std::vector<std::string>& flags, bool shell = false) {
  std::vector<std::string> args = flags;
  args.push_back(shell ? kShell : kScript);
  args.push_back(shell ? "/tmp/out" : "--touch_file_dir=/tmp/out");
  return args;
}

std::vector<Case> cases() {
  const std::vector<std::string> etcd{"--nnodes=1",          "--nproc_per_node=4",
                                      "--rdzv_backend=etcd", "--rdzv_endpoint=localhost:2379",
                                      "--rdzv_id=42",        "--monitor_interval=1",
                                      "--start_method=spawn"};
  std::vector<std::string> c10d = etcd;
  c10d[2] = "--rdzv_backend=c10d";
  c10d[3] = "--rdzv_endpoint=localhost:29400";
  // test_launch_with_env_vars: the whole command line in PET_* variables.
  const std::map<std::string, std::string> pet_run{{"PET_NNODES", "1"},
                                                   {"PET_NPROC_PER_NODE", "4"},
                                                   {"PET_RDZV_BACKEND", "c10d"},
                                                   {"PET_RDZV_ID", "9"},
                                                   {"PET_RDZV_ENDPOINT", "localhost:29400"},
                                                   {"PET_NO_PYTHON", "1"},
                                                   {"PET_MONITOR_INTERVAL", "1"},
                                                   {"PET_START_METHOD", "spawn"}};
  auto with_env = [](std::map<std::string, std::string> env,
                     const std::map<std::string, std::string>& more) {
    env.insert(more.begin(), more.end());
    return env;
  };
  auto with = [](std::vector<std::string> flags, const std::vector<std::string>& more) {
    flags.insert(flags.end(), more.begin(), more.end());
    return flags;
  };
  return {
      {"test_launch_user_script_python (etcd: cohort's daemon replaces it)",
       script_args(etcd),
       {},
       0,
       "--rdzv-backend etcd"},
      {"test_launch_user_script_python, on c10d",
       script_args(c10d),
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.nproc == 4);
         CHECK(run.config.env.run_id == "42");
         CHECK(run.config.args ==
               std::vector<std::string>{"-u", kScript, "--touch_file_dir=/tmp/out"});
       }},
      {"test_launch_user_script_python_caffe2_bc",
       script_args({"--nnodes=1", "--nproc_per_node=4", "--monitor_interval=1",
                    "--start_method=spawn", "--master_addr=localhost", "--master_port=29517",
                    "--node_rank=0"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         // One node: cohort's private daemon, whatever --master-addr/--master-port say.
         CHECK(run.config.nproc == 4);
         CHECK(run.daemon.embed == DaemonPlan::Embed::Yes);
       }},
      {"test_launch_user_script_python_caffe2_bc, on two nodes",
       script_args({"--nnodes=2", "--nproc_per_node=4", "--master_addr=localhost",
                    "--master_port=29517", "--node_rank=1"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.rendezvous.host == "localhost");
         CHECK(run.config.rendezvous.port == 29517);
         CHECK(run.config.rendezvous.rank_hint == 1);
       }},
      {"test_launch_user_script_bash: --no_python with --module",
       script_args(with(c10d, {"--no_python", "--module"}), true),
       {},
       0,
       "--module"},
      {"test_launch_user_script_bash",
       script_args(with(c10d, {"--no_python"}), true),
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.executable == kShell);
         CHECK(run.config.args == std::vector<std::string>{"/tmp/out"});
       }},
      {"test_launch_user_script_default_nproc",
       script_args({"--nnodes=1", "--rdzv_backend=c10d", "--rdzv_endpoint=localhost:29400",
                    "--rdzv_id=7", "--monitor_interval=1", "--start_method=spawn", "--no_python"},
                   true),
       {},
       0,
       "",
       [](const ValidatedRun& run) { CHECK(run.config.nproc == 1); }},
      {"test_launch_with_env_vars: PET_MODULE=1 with PET_NO_PYTHON=1",
       {kShell, "/tmp/out"},
       with_env(pet_run, {{"PET_MODULE", "1"}}),
       0,
       "--module"},
      {"test_launch_with_env_vars",
       {kShell, "/tmp/out"},
       with_env(pet_run, {{"PET_MODULE", "0"}}),
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.nproc == 4);
         CHECK(run.config.env.run_id == "9");
         CHECK(run.config.executable == kShell);
       }},
      {"test_nproc_launch_unknown_configurations",
       script_args(with(c10d, {"--nproc_per_node=unknown"}), true),
       {},
       0,
       "--nproc-per-node"},
      {"test_launch_elastic: --nnodes=1:2",
       script_args({"--nnodes=1:2", "--nproc_per_node=4", "--rdzv_backend=c10d",
                    "--rdzv_endpoint=localhost:29400", "--rdzv_id=3", "--monitor_interval=1",
                    "--start_method=spawn"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.rendezvous.config.min_nodes == 1);
         CHECK(run.config.rendezvous.config.max_nodes == 2);
       }},
      {"test_launch_elastic_worker_raise_exception: --max_restarts=0",
       with(script_args({"--nnodes=1:2", "--nproc_per_node=4", "--rdzv_backend=c10d",
                         "--rdzv_endpoint=localhost:29400", "--max_restarts=0"}),
            {"--fail"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) { CHECK(run.config.env.max_restarts == 0); }},
      {"test_launch_standalone",
       script_args({"--nnodes=1", "--nproc_per_node=4", "--standalone", "--monitor_interval=1",
                    "--start_method=spawn"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.nproc == 4);
         CHECK(run.config.env.run_id.size() == 36);  // a random uuid
       }},
      {"test_launch_run_path",
       script_args({"--run_path", "--nnodes=1", "--nproc_per_node=4", "--monitor_interval=1",
                    "--start_method=spawn"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) { CHECK(run.config.nproc == 4); }},
      {"test_init_method_tcp_with_torchelastic",
       {"--run_path", "--nnodes=1", "--nproc_per_node=4", "--master_addr=localhost",
        "--master_port=29533", "--monitor_interval=1", kScript,
        "--init_method=tcp://localhost:29533"},
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.args.back() == "--init_method=tcp://localhost:29533");
       }},
      {"test_min_max_nodes_parse: 2:20:30", script_args({"--nnodes=2:20:30"}), {}, 0, "--nnodes"},
      {"--start_method choices", script_args({"--start_method=thread"}), {}, 0, "--start-method"},
      {"argparse_util_test: PET_ gives the default, the flag wins",
       script_args({"--max_restarts", "2"}),
       {{"PET_MAX_RESTARTS", "5"}, {"PET_ROLE", "env"}},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.env.max_restarts == 2);
         CHECK(run.config.env.role == "env");
       }},
      {"argparse_util_test: a flag given beats PET_=0",
       script_args({"--standalone"}),
       {{"PET_STANDALONE", "0"}},
       0,
       "",
       [](const ValidatedRun& run) { CHECK(run.config.env.run_id.size() == 36); }},
      {"argparse abbreviations: --max_r and --nproc",
       script_args({"--max_r=2", "--nproc", "3"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.env.max_restarts == 2);
         CHECK(run.config.nproc == 3);
       }},
      {"argparse abbreviations: ambiguous --m",
       script_args({"--m", "1"}),
       {},
       0,
       "ambiguous option: --m"},
      {"test_virtual_local_rank",
       script_args({"--nproc_per_node=2", "--virtual_local_rank", "--standalone"}),
       {},
       2,
       "",
       [](const ValidatedRun& run) { CHECK(run.config.env.virtual_local_rank); }},
      {"--signals_to_handle and --shutdown_timeout",
       script_args({"--signals_to_handle=SIGTERM,SIGUSR1", "--shutdown_timeout=60"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.shutdown_timeout == std::chrono::seconds(60));
         CHECK(run.config.env.signals_to_handle == "SIGTERM,SIGUSR1");
       }},
      {"--local_ranks_filter",
       script_args({"--nproc_per_node=3", "--local_ranks_filter=0,2"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.output.console_ranks == std::set<int>{0, 2});
       }},
      {"--duplicate_stdout_filters 'apple,orange'",
       script_args({"--duplicate_stdout_filters", "apple,orange"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.output.stdout_filters == std::vector<std::string>{"apple", "orange"});
       }},
      {"--logs_specs: accepted with a warning",
       script_args({"--logs_specs=custom"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) { CHECK(run.warnings.size() == 1); }},
      {"--numa_binding without a GPU: refused",
       script_args({"--numa_binding=socket"}),
       {},
       0,
       "--numa-binding socket"},
      {"--numa_binding choices", script_args({"--numa_binding=rack"}), {}, 0, "--numa-binding"},
      // argparse reads "--name=" as an empty value (an unset variable in a script), never as
      // "take the next word".
      {"--role= is an empty role",
       script_args({"--role=", "--standalone"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.env.role.empty());
         CHECK(run.daemon.embed == DaemonPlan::Embed::Yes);
       }},
      {"--log_dir= before the script",
       script_args({"--log_dir=", "--nproc_per_node=2"}),
       {},
       0,
       "",
       [](const ValidatedRun& run) {
         CHECK(run.config.nproc == 2);
         CHECK(run.config.args ==
               std::vector<std::string>{"-u", kScript, "--touch_file_dir=/tmp/out"});
       }},
      {"--rdzv_id= (nodes could never meet: refused, where torchrun makes one up per node)",
       script_args({"--rdzv_backend=c10d", "--rdzv_endpoint=localhost:29400",
                    "--rdzv_id=", "--nproc_per_node", "2"}),
       {},
       0,
       "--rdzv-id '': the run id is empty"},
      {"--max_restarts= (argparse: invalid int value: '')",
       script_args({"--max_restarts="}),
       {},
       0,
       "--max-restarts: expected a number, got ''"},
  };
}

}  // namespace

TEST_CASE("torchrun's own argument tests, run through cohort run's parser",
          "[unit][launcher][torchrun]") {
  for (const Case& c : cases()) {
    Outcome outcome = run_args(c.args, c.env, c.gpus);
    INFO(c.from << "\n"
                << Catch::Detail::stringify(c.args) << "\nparse: " << outcome.parse_error
                << "\nproblems: " << Catch::Detail::stringify(outcome.run.problems));
    if (c.error.empty()) {
      REQUIRE(outcome.parse_error.empty());
      REQUIRE(outcome.run.problems.empty());
      c.check(outcome.run);
      continue;
    }
    std::string first = outcome.parse_error.empty() && !outcome.run.problems.empty()
                            ? outcome.run.problems.front()
                            : outcome.parse_error;
    CHECK(first.find(c.error) != std::string::npos);
  }
}

TEST_CASE("torchrun's _test_nproc_launch_configuration: auto, a number, gpu",
          "[unit][launcher][torchrun]") {
  struct NprocCase {
    std::string value;
    int gpus;
    int expected;
  };
  for (const NprocCase& c :
       std::vector<NprocCase>{{"auto", 0, 8}, {"4", 0, 4}, {"auto", 3, 3}, {"gpu", 3, 3}}) {
    Outcome outcome =
        run_args({"--nnodes=1", "--nproc_per_node=" + c.value, "--no_python", kShell}, {}, c.gpus);
    INFO(c.value << " with " << c.gpus
                 << " GPUs: " << Catch::Detail::stringify(outcome.run.problems));
    REQUIRE(outcome.run.problems.empty());
    CHECK(outcome.run.config.nproc == c.expected);
  }
}
