#include "launcher/options/run_options.hpp"

#include <algorithm>
#include <catch2/catch.hpp>

#include "launcher/launch/launch_plan.hpp"
#include "launcher/options/command_words.hpp"
#include "launcher/options/help_format.hpp"
#include "tests/support/env_guard.hpp"

using namespace cohort;

namespace {

struct Parsed {
  RunOptions options;
  std::string command_error;
};

// `cohort run`'s flags on `app`, into `options`, and `args` parsed by it.
void parse_with(CLI::App& app, RunOptions& options, std::vector<std::string> args) {
  add_run_flags(app, options);
  args.insert(args.begin(), "run");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

// Parses `args` as `cohort run` does, with `torch_env` for apply_torch_env_defaults.
Parsed parse(std::vector<std::string> args,
             const std::map<std::string, std::string>& torch_env = {}) {
  Parsed parsed;
  CLI::App app;
  parse_with(app, parsed.options, std::move(args));
  parsed.command_error = take_command(app.remaining(), parsed.options);
  apply_torch_env_defaults(app, parsed.options, torch_env);
  return parsed;
}

}  // namespace

TEST_CASE("both spellings of a flag work", "[unit][launcher]") {
  CHECK(parse({"--nproc-per-node", "3", "train.py"}).options.nproc_per_node == "3");
  CHECK(parse({"--nproc_per_node=4", "train.py"}).options.nproc_per_node == "4");
  CHECK(parse({"--max_restarts", "2", "train.py"}).options.max_restarts == 2);
}

TEST_CASE("the script and its arguments are taken as given", "[unit][launcher]") {
  Parsed parsed = parse({"--nproc-per-node", "2", "train.py", "--lr", "0.1", "--nnodes", "9"});
  CHECK(parsed.command_error.empty());
  CHECK(parsed.options.command ==
        std::vector<std::string>{"train.py", "--lr", "0.1", "--nnodes", "9"});
  CHECK(parsed.options.nnodes == "1:1");  // the script's --nnodes is not cohort's
}

TEST_CASE("a flag given twice takes its last value as torchrun's argparse does",
          "[unit][launcher]") {
  Parsed parsed = parse({"--nproc_per_node=2", "--nproc_per_node=1", "--max_restarts=1",
                         "--max-restarts=0", "--role", "a", "--role", "b", "t.py", "--role", "c"});
  CHECK(parsed.command_error.empty());
  CHECK(parsed.options.nproc_per_node == "1");
  CHECK(parsed.options.max_restarts == 0);
  CHECK(parsed.options.role == "b");
  CHECK(parsed.options.command == std::vector<std::string>{"t.py", "--role", "c"});
  RunOptions more = parse({"--rdzv-conf", "join_timeout=5", "--rdzv_conf", "join_timeout=7",
                           "--shutdown-timeout", "3", "--shutdown-timeout", "4", "--tee", "3", "-t",
                           "1", "--nnodes=1:2", "--nnodes", "1", "t.py"})
                        .options;
  CHECK(more.rdzv_conf == "join_timeout=7");
  CHECK(more.shutdown_timeout == 4.0);
  CHECK(more.tee == "1");
  CHECK(more.nnodes == "1");
  // A counted flag still counts.
  CHECK(parse({"-v", "-v", "t.py"}).options.verbose == 2);
  CHECK(parse({"--standalone", "--standalone", "t.py"}).options.standalone);
}

TEST_CASE("every flag of cohort run that takes a value takes the last one given",
          "[unit][launcher]") {
  RunOptions options;
  CLI::App app;
  add_run_flags(app, options);
  int checked = 0;
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_expected_min() == 0 || option->get_lnames().empty()) continue;  // on/off
    INFO(option->get_name());
    CHECK(option->get_expected_max() == 1);
    CHECK(option->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeLast);
    ++checked;
  }
  CHECK(checked > 30);
}

namespace {

// The training command of `cohort run ARGS` as main() takes it: after a "--", CLI11 leaves the
// words to the top-level command.
std::vector<std::string> command_of(std::vector<std::string> args) {
  RunOptions options;
  CLI::App top;
  top.allow_extras();
  CLI::App* run = top.add_subcommand("run");
  add_run_flags(*run, options);
  args.insert(args.begin(), {"cohort", "run"});
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  top.parse(static_cast<int>(argv.size()), argv.data());
  std::string error = take_command(command_words(top, *run), options);
  INFO(error);
  CHECK(error.empty());
  return options.command;
}

}  // namespace

TEST_CASE("one -- before the script or right after it is dropped as torchrun drops it",
          "[unit][launcher]") {
  using Words = std::vector<std::string>;
  CHECK(command_of({"--standalone", "ap.py", "--", "--lr", "0.1"}) ==
        Words{"ap.py", "--lr", "0.1"});
  CHECK(command_of({"--standalone", "--", "ap.py", "--lr", "0.1"}) ==
        Words{"ap.py", "--lr", "0.1"});
  CHECK(command_of({"ap.py", "a", "--", "b"}) == Words{"ap.py", "a", "--", "b"});
  CHECK(command_of({"ap.py", "--"}) == Words{"ap.py"});
  CHECK(command_of({"ap.py", "a", "--"}) == Words{"ap.py", "a", "--"});
  // Only one: a second "--" is the script's.
  CHECK(command_of({"--", "ap.py", "--", "x"}) == Words{"ap.py", "--", "x"});
  CHECK(command_of({"ap.py", "--", "--", "x"}) == Words{"ap.py", "--", "x"});
  // -m: the module stands where the script does.
  CHECK(command_of({"-m", "mymod", "--", "x"}) == Words{"mymod", "x"});
  CHECK(command_of({"-m", "--", "mymod", "x"}) == Words{"mymod", "x"});
}

TEST_CASE("PET_ variables give defaults that flags override", "[unit][launcher]") {
  test::EnvGuard env;
  env.set("PET_NPROC_PER_NODE", "5");
  env.set("PET_STANDALONE", "1");
  CHECK(parse({"train.py"}).options.nproc_per_node == "5");
  CHECK(parse({"train.py"}).options.standalone);
  CHECK(parse({"--nproc-per-node", "2", "train.py"}).options.nproc_per_node == "2");
  env.set("PET_STANDALONE", "0");
  CHECK_FALSE(parse({"train.py"}).options.standalone);
}

// Parses `cohort ARGS` with main()'s subcommands that read PET_* (run, launch) and one that
// does not (status); true when the parse succeeded. `max_restarts`: what the one given got.
bool parses_with_run_and_launch(std::vector<std::string> args, int& max_restarts) {
  RunOptions run_options;
  LaunchOptions launch_options;
  CLI::App top;
  top.allow_extras();
  CLI::App* run = top.add_subcommand("run");
  add_run_flags(*run, run_options);
  CLI::App* launch = top.add_subcommand("launch");
  add_launch_flags(*launch, launch_options);
  top.add_subcommand("status");
  args.insert(args.begin(), "cohort");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  try {
    top.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& error) {
    UNSCOPED_INFO(error.what());
    return false;
  }
  max_restarts = run->parsed() ? run_options.max_restarts : launch_options.run.max_restarts;
  return true;
}

TEST_CASE("a flag given wins over a bad PET_ value that no other command reads",
          "[unit][launcher]") {
  test::EnvGuard env;
  env.set("PET_MAX_RESTARTS", "abc");
  int max_restarts = -1;
  CHECK(parses_with_run_and_launch({"run", "--max_restarts=1", "t.py"}, max_restarts));
  CHECK(max_restarts == 1);
  CHECK(parses_with_run_and_launch({"launch", "-H", "a", "--max-restarts", "2", "t.py"},
                                   max_restarts));
  CHECK(max_restarts == 2);
  CHECK(parses_with_run_and_launch({"status"}, max_restarts));
  // Not given: the variable is the value, and a bad one is an error.
  CHECK_FALSE(parses_with_run_and_launch({"run", "t.py"}, max_restarts));
  env.set("PET_MAX_RESTARTS", "3");
  CHECK(parses_with_run_and_launch({"run", "t.py"}, max_restarts));
  CHECK(max_restarts == 3);
  CHECK(parses_with_run_and_launch({"launch", "-H", "a", "t.py"}, max_restarts));
  CHECK(max_restarts == 3);
}

// What the parse of `args` (with the environment as it is) says of `problem`'s flag.
std::string origin_of(std::vector<std::string> args, const std::string& problem) {
  RunOptions options;
  CLI::App app;
  parse_with(app, options, std::move(args));
  return env_origin(app, problem, {{"PET_NNODES", "0"}, {"PET_MAX_RESTARTS", "x"}});
}

TEST_CASE("a bad value from a PET_ variable is said to come from it, one typed is not",
          "[unit][launcher]") {
  test::EnvGuard env;
  env.set("PET_NNODES", "0");
  CHECK(origin_of({"t.py"}, "--nnodes: expected N or MIN:MAX, got '0'") ==
        " (from PET_NNODES in the environment)");
  // Given on the command line, in either spelling: the value is the user's own.
  CHECK(origin_of({"--nnodes", "0", "t.py"}, "--nnodes: expected N").empty());
  CHECK(origin_of({"--nnodes=0", "t.py"}, "--nnodes: expected N").empty());
  // A conversion error names the flag after other words.
  CHECK(origin_of({"t.py"}, "Could not convert: --max-restarts = x") ==
        " (from PET_MAX_RESTARTS in the environment)");
  CHECK(origin_of({"t.py"}, "no flag named here").empty());
  CHECK(origin_of({"t.py"}, "--bogus: x").empty());
  CHECK(origin_of({"t.py"}, "--nproc-per-node: x").empty());  // PET_NPROC_PER_NODE is unset
}

TEST_CASE("unknown flags and a missing script are errors", "[unit][launcher]") {
  CHECK(parse({"--bogus", "t.py"}).command_error.find("--bogus") != std::string::npos);
  CHECK(parse({}).command_error.find("missing the training script") != std::string::npos);
  CHECK(parse({"--", "-weird-name.py"}).command_error.empty());
  CHECK(parse({"--ntasks-per-node", "t.py"}).command_error ==
        "unknown flag '--ntasks-per-node' (srun's; here --nproc-per-node) (see cohort run --help)");
}

TEST_CASE("cohort's own log level: -q, -v, -vv", "[unit][launcher]") {
  test::EnvGuard env;
  env.unset("LOGLEVEL");
  CHECK(log_level_for(parse({"t.py"}).options) == log::Level::Warn);
  CHECK(log_level_for(parse({"-q", "t.py"}).options) == log::Level::Error);
  CHECK(log_level_for(parse({"-v", "t.py"}).options) == log::Level::Info);
  CHECK(log_level_for(parse({"-vv", "t.py"}).options) == log::Level::Debug);
  env.set("LOGLEVEL", "ERROR");
  CHECK(log_level_for(parse({"t.py"}).options) == log::Level::Error);
  CHECK(log_level_for(parse({"-v", "t.py"}).options) == log::Level::Info);
}

TEST_CASE("every flag of cohort run has both spellings and reads PET_<NAME>", "[unit][launcher]") {
  RunOptions options;
  CLI::App app;
  add_run_flags(app, options);
  int checked = 0;
  for (const CLI::Option* option : app.get_options()) {
    std::vector<std::string> names = option->get_lnames();
    if (names.empty() || names.front() == "help") continue;
    std::string dashed = "--" + names.front();
    INFO(dashed);
    if (dashed.find('-', 2) != std::string::npos) {
      std::string underscored = dashed;
      std::replace(underscored.begin() + 2, underscored.end(), '-', '_');
      CHECK(option->check_lname(underscored.substr(2)));
    }
    CHECK(option->get_envname() == pet_name(dashed));
    ++checked;
  }
  CHECK(checked > 30);
}

TEST_CASE("flags that were missing a spelling or PET_ name now have them", "[unit][launcher]") {
  CHECK(parse({"--raw_output", "t.py"}).options.raw_output);
  CHECK(parse({"--token_file", "/k", "t.py"}).options.token_file == "/k");
  test::EnvGuard env;
  env.set("PET_RAW_OUTPUT", "1");
  env.set("PET_INSECURE", "1");
  env.set("PET_VIRTUAL_LOCAL_RANK", "1");
  env.set("PET_DUPLICATE_STDOUT_FILTERS", "loss");
  Parsed parsed = parse({"t.py"});
  CHECK(parsed.options.raw_output);
  CHECK(parsed.options.insecure);
  CHECK(parsed.options.virtual_local_rank);
  CHECK(parsed.options.duplicate_stdout_filters == "loss");
}

TEST_CASE("every current torchrun flag is accepted in both spellings", "[unit][launcher]") {
  Parsed parsed = parse({"--logs_specs", "mine", "--numa-binding", "node", "--virtual_local_rank",
                         "--duplicate-stdout-filters", "a,b", "--duplicate_stderr_filters", "c",
                         "--log_line_prefix_template", "${rank}:", "--shutdown_timeout", "5",
                         "--signals_to_handle", "SIGUSR1", "--local_ranks_filter", "0", "t.py"});
  CHECK(parsed.command_error.empty());
  CHECK(parsed.options.logs_specs == "mine");
  CHECK(parsed.options.numa_binding == "node");
  CHECK(parsed.options.virtual_local_rank);
  CHECK(parsed.options.duplicate_stdout_filters == "a,b");
  CHECK(parsed.options.duplicate_stderr_filters == "c");
  CHECK(parsed.options.log_line_prefix_template == "${rank}:");
  CHECK(parsed.options.shutdown_timeout == 5.0);
}

TEST_CASE("cohort run --help: real defaults, the script in the usage, no internal flags",
          "[unit][launcher]") {
  RunOptions options;
  CLI::App top{"", "cohort"};
  CLI::App* run = top.add_subcommand("run", "");
  run->formatter(std::make_shared<ScriptUsageFormatter>());
  add_run_flags(*run, options);
  std::string help = run->help("cohort");
  INFO(help);
  CHECK(help.find("Usage: cohort run [OPTIONS] SCRIPT [ARGS...]") != std::string::npos);
  CHECK(help.find("INT=29500") != std::string::npos);
  CHECK(help.find("TEXT=127.0.0.1") != std::string::npos);
  CHECK(help.find("--node-rank-hint") == std::string::npos);
  CHECK(help.find("--under-launch") == std::string::npos);
  CHECK(help.find("--raw-output") != std::string::npos);
  // Hidden, yet accepted.
  std::vector<std::string> args{"run", "--node-rank-hint", "--under_launch", "t.py"};
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  RunOptions parsed;
  CLI::App app;
  add_run_flags(app, parsed);
  app.parse(static_cast<int>(argv.size()), argv.data());
  CHECK(parsed.node_rank_hint);
  CHECK(parsed.under_launch);
}

TEST_CASE("errors name the command they belong to", "[unit][launcher]") {
  RunOptions options;
  CHECK(take_command({"--bogus", "t.py"}, options, "launch").find("cohort launch --help") !=
        std::string::npos);
  CHECK(take_command({}, options, "launch").find("cohort launch [OPTIONS] SCRIPT") !=
        std::string::npos);
  CLI::ExtrasError error({"--bogus"});
  CHECK(parse_error_message("cohort status", error).find("(cohort status --help)") !=
        std::string::npos);
}

TEST_CASE("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 is --worker-store rank0 unless it is given",
          "[unit][launcher]") {
  auto worker_store = [](std::vector<std::string> args,
                         const std::map<std::string, std::string>& env) {
    return parse(std::move(args), env).options.worker_store;
  };
  const std::map<std::string, std::string> disabled{{"TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1"}};
  CHECK(worker_store({"t.py"}, disabled) == "rank0");
  CHECK(worker_store({"t.py"}, {}) == "daemon");
  CHECK(worker_store({"t.py"}, {{"TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "0"}}) == "daemon");
  CHECK(worker_store({"--worker-store", "daemon", "t.py"}, disabled) == "daemon");
}
