// cohort: the launcher's entry point. Declares the subcommands and their flags, parses the
// command line, and hands each subcommand to its own file (run_command, launch_command,
// status_command, rendezvous_command, stop_command, doctor_command), whose result is the exit
// code.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <utility>

#include "agent/worker_env.hpp"
#include "cohort_version.hpp"  // generated: the version, commit and build type
#include "common/exit_codes.hpp"
#include "common/run_id.hpp"
#include "launcher/cli/control_request.hpp"
#include "launcher/cli/doctor_command.hpp"
#include "launcher/cli/launch_command.hpp"
#include "launcher/cli/moved_rendezvous.hpp"
#include "launcher/cli/rendezvous_command.hpp"
#include "launcher/cli/run_command.hpp"
#include "launcher/cli/status_command.hpp"
#include "launcher/cli/status_watch.hpp"
#include "launcher/cli/stop_command.hpp"
#include "launcher/options/did_you_mean.hpp"
#include "launcher/options/flag_abbreviations.hpp"
#include "launcher/options/help_format.hpp"
#include "launcher/options/run_options.hpp"
#include "launcher/tokens/slurm_token.hpp"
#include "launcher/tokens/token_source.hpp"
#include "process/keeper_process.hpp"

using namespace cohort;

extern char** environ;

namespace {

// The token a query proves: --token-file, else $COHORT_TOKEN, else Slurm's job token.
std::optional<std::string> query_token(const std::string& command, const std::string& token_file) {
  EnvMap env = parse_environ(environ);
  TokenResult token = load_token(token_file, env);
  if (token.token.empty() && token.error.empty()) token = slurm_job_token(env);
  if (!token.error.empty()) {
    std::cerr << "cohort " << command << ": " << token.error << "\n";
    return std::nullopt;
  }
  return token.token;
}

// A run id given to `cohort status` (--rdzv-id, --events) that no run can have, or two that
// differ.
bool bad_status_run_id(const StatusQuery& query) {
  for (const auto& [flag, id] :
       {std::pair{"--rdzv-id", &query.run_id}, std::pair{"--events", &query.events_run}}) {
    std::string problem = id->empty() ? "" : run_id_problem(*id);
    if (problem.empty()) continue;
    std::cerr << "cohort status: " << flag << ": " << problem << "\n";
    return true;
  }
  if (!query.run_id.empty() && !query.events_run.empty() && query.run_id != query.events_run) {
    std::cerr << "cohort status: --events " << query.events_run << " names another run than "
              << "--rdzv-id " << query.run_id << ": --events RUN alone is enough\n";
    return true;
  }
  return false;
}

int status_command(StatusQuery query, const std::string& token_file, double watch_seconds) {
  if (bad_status_run_id(query)) return kExitUsage;
  std::optional<std::string> token = query_token("status", token_file);
  if (!token) return kExitUsage;
  query.token = *token;
  std::string run_id = query.events_run.empty() ? query.run_id : query.events_run;
  const std::string given_endpoint = query.endpoint;  // --rdzv-endpoint, before any move
  if (!follow_the_run("status", query.endpoint, query.fallbacks, run_id, query.token,
                      RunWanted::Any))
    return kExitUsage;
  if (!query.events_run.empty()) {
    if (watch_seconds > 0) {
      std::cerr << "cohort status: --events prints a run's history once; it does not combine "
                   "with --watch\n";
      return kExitUsage;
    }
    return run_events_command(query);
  }
  if (watch_seconds <= 0) return run_status_command(query);
  if (query.json) {
    std::cerr << "cohort status: --watch redraws a table; it does not combine with --json\n";
    return kExitUsage;
  }
  RelocateWatch relocate;
  if (!query.fallbacks.empty()) {
    relocate = [given_endpoint, query](const std::string& current) {
      return run_elsewhere(current, given_endpoint, query.fallbacks, query.run_id, query.token);
    };
  }
  return watch_status(query, std::chrono::milliseconds(static_cast<int64_t>(watch_seconds * 1000)),
                      relocate);
}

// A first word that names no command ("cohort runn"): says so, with the closest command.
bool unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;
  std::vector<std::string> commands;
  for (const CLI::App* command : app.get_subcommands({})) commands.push_back(command->get_name());
  if (std::find(commands.begin(), commands.end(), argv[1]) != commands.end()) return false;
  std::string close = closest_name(argv[1], commands);
  std::cerr
      << "cohort: unknown command '" << argv[1] << "'"
      << (close.empty() ? "" : " (did you mean '" + close + "'?)")
      << "; the commands are run, launch, rendezvous, status, stop and doctor (cohort --help)\n";
  return true;
}

// Words a command without a script of its own did not take ("cohort status --rdzv-endpiont").
bool refused_extras(const CLI::App& command) {
  if (!command.parsed() || command.remaining().empty()) return false;
  std::cerr << "cohort " << command.get_name() << ": "
            << unknown_argument(command.remaining().front(), flag_names(command)) << " (cohort "
            << command.get_name() << " --help)\n";
  return true;
}

// The command named by argv[1] ("cohort run"), or "cohort".
std::string command_name(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "cohort";
  return "cohort " + app.get_subcommand(argv[1])->get_name();
}

// argv with the command's abbreviated flags written out (--max-r: --max-restarts). Empty, after
// saying why, when one is ambiguous.
std::vector<std::string> expanded_words(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> words(argv, argv + argc);
  if (argc < 3 || argv[1][0] == '-') return words;
  const CLI::App& command = *app.get_subcommand(argv[1]);
  std::vector<std::string> flags(words.begin() + 2, words.end());
  ExpandedWords expanded = expand_abbreviations(flags, flag_specs(command));
  if (!expanded.error.empty()) {
    std::cerr << command_name(app, argc, argv) << ": " << expanded.error << " ("
              << command_name(app, argc, argv) << " --help)\n";
    return {};
  }
  words.resize(2);
  words.insert(words.end(), expanded.words.begin(), expanded.words.end());
  return words;
}

// Every subcommand's options, filled in by the parse, and the subcommand itself.
struct Commands {
  RunOptions run_options;
  LaunchOptions launch_options;
  DaemonCommand daemon_command;
  StatusQuery status_query;
  std::string status_token_file;
  double watch_seconds = 0;
  StopQuery stop_query;
  DoctorOptions doctor_options;
  CLI::App* run = nullptr;
  CLI::App* launch = nullptr;
  CLI::App* rendezvous = nullptr;
  CLI::App* status = nullptr;
  CLI::App* stop = nullptr;
  CLI::App* doctor = nullptr;
};

void add_status_flags(CLI::App& status, Commands& commands) {
  status
      .add_option("--rdzv-endpoint,--rdzv_endpoint", commands.status_query.endpoint,
                  "host[:port] of the daemon")
      ->capture_default_str();
  status.add_option("--rdzv-id,--rdzv_id", commands.status_query.run_id,
                    "Only this run (what a run's token may see)");
  status.add_option(
      "--rdzv-fallback,--rdzv_fallback", commands.status_query.fallbacks,
      "host[:port],... where the run's rendezvous may have moved (as given to cohort run): "
      "asked in turn when --rdzv-endpoint does not have the run");
  status.add_option("--token-file", commands.status_token_file,
                    "The daemon's or the run's token (default: $COHORT_TOKEN)");
  add_timeout_flag(status, commands.status_query.timeout_ms);
  status.add_flag("--json", commands.status_query.json, "Print the raw JSON");
  CLI::Option* brief = status.add_flag(
      "--brief", commands.status_query.brief,
      "Count each run's nodes, and those heard within the heartbeat timeout, instead of listing "
      "them (for very large runs; a daemon older than this flag lists them)");
  brief->excludes(status.add_option("--events", commands.status_query.events_run,
                                    "Print the history of run RUN from the daemon, an event a "
                                    "line (JSON lines with --json)"));
  status
      .add_option("--watch", commands.watch_seconds,
                  "Redraw a compact table every SECONDS (default 2) until Ctrl-C (with --brief: "
                  "each run's nodes counted)")
      ->expected(0, 1)
      ->default_str("2")
      ->check(number_within(0.2, 3600, "seconds"));
}

// What --version prints; also the line a launched agent says it is ready with.
std::string version_text() {
  return std::string("cohort ") + COHORT_VERSION + " (commit " + COHORT_COMMIT + ", " +
         COHORT_BUILD_TYPE + " build)";
}

void declare_commands(CLI::App& app, Commands& commands) {
  app.require_subcommand(1);
  app.allow_extras();  // "cohort run -- script args": after "--" the words land here
  app.set_version_flag("--version", version_text());
  commands.run = app.add_subcommand("run", "Run the workers of this node (a drop-in for torchrun)");
  commands.run->formatter(std::make_shared<ScriptUsageFormatter>());
  add_run_flags(*commands.run, commands.run_options);
  commands.launch = app.add_subcommand(
      "launch", "Run `cohort run` on several hosts, over ssh or as Slurm job steps (like mpirun)");
  commands.launch->formatter(std::make_shared<ScriptUsageFormatter>());
  add_launch_flags(*commands.launch, commands.launch_options);
  commands.rendezvous =
      app.add_subcommand("rendezvous", "Run the rendezvous daemon (the same as cohortd)");
  add_daemon_flags(*commands.rendezvous, commands.daemon_command);
  commands.status = app.add_subcommand("status", "Show what a rendezvous daemon knows");
  add_status_flags(*commands.status, commands);
  commands.stop =
      app.add_subcommand("stop", "End a run cleanly: every node stops its workers and exits 130");
  add_stop_flags(*commands.stop, commands.stop_query);
  commands.doctor = app.add_subcommand(
      "doctor",
      "Check this node before trusting it: GPUs, cgroups, topology, limits, torch, tools");
  add_doctor_flags(*commands.doctor, commands.doctor_options);
  for (CLI::App* command : {commands.rendezvous, commands.status, commands.stop, commands.doctor}) {
    refuse_empty_values(*command);
    command->set_version_flag("--version", version_text());  // cohortd --version's twin
  }
}

// Parses the command line, abbreviations written out. An exit code when there is nothing to run
// (--help, --version, a usage error, said on stderr).
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  if (unknown_command(app, argc, argv)) return kExitUsage;
  std::string command = command_name(app, argc, argv);
  app.failure_message([command](const CLI::App* top, const CLI::Error& error) {
    std::string origin;  // a bad value from PET_*, which the user may never have typed
    for (const CLI::App* sub : top->get_subcommands())
      origin += env_origin(*sub, error.what(), parse_environ(environ));
    return parse_error_message(command, error, origin, top);
  });
  std::vector<std::string> words = expanded_words(app, argc, argv);
  if (words.empty()) return kExitUsage;
  // "--watch=$INTERVAL" with the variable unset: CLI11 reads it as a bare --watch (2 s).
  if (command == "cohort status" && std::count(words.begin(), words.end(), "--watch=") > 0) {
    std::cerr << "cohort status: --watch: expected seconds from 0.2 to 3600, got '' (cohort "
                 "status --help)\n";
    return kExitUsage;
  }
  std::vector<char*> args;
  for (std::string& word : words) args.push_back(word.data());
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? kExitSuccess : kExitUsage;
  } catch (const std::out_of_range&) {
    std::cerr << out_of_range_message(command, app, words);
    return kExitUsage;
  }
  return std::nullopt;
}

// Words that a command without a script of its own did not take; said on stderr.
bool has_stray_words(const CLI::App& app, const Commands& commands) {
  if (refused_extras(*commands.rendezvous) || refused_extras(*commands.status) ||
      refused_extras(*commands.stop) || refused_extras(*commands.doctor))
    return true;
  if (app.remaining().empty()) return false;
  std::cerr << "cohort: unexpected arguments: " << CLI::detail::join(app.remaining(), " ") << "\n";
  return true;
}

int stop_command(StopQuery query) {
  std::optional<std::string> token = query_token("stop", query.token_file);
  if (!token) return kExitUsage;
  query.token = *token;
  query.by = stop_requester();
  if (!follow_the_run("stop", query.endpoint, query.fallbacks, query.run_id, query.token,
                      RunWanted::Live))
    return kExitUsage;
  return run_stop_command(query);
}

// `exit_code`, unless what the command wrote on stdout was lost (a full disk, a closed pipe):
// `cohort status --json > file` must not succeed with half a file.
int what_was_written(const std::string& command, int exit_code) {
  errno = 0;
  std::cout.flush();
  if (std::cout.good()) return exit_code;
  std::cerr << command << ": cannot write stdout"
            << (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()) << "\n";
  return exit_code == kExitSuccess ? kExitInternal : exit_code;
}

// Runs the parsed subcommand; its result is the exit code.
int dispatch(const CLI::App& app, Commands& commands) {
  commands.run_options.own_version = commands.launch_options.run.own_version = version_text();
  if (commands.run->parsed()) return run_command(*commands.run, commands.run_options);
  if (commands.launch->parsed()) return launch_command(*commands.launch, commands.launch_options);
  if (has_stray_words(app, commands)) return kExitUsage;
  if (commands.rendezvous->parsed()) return run_daemon(commands.daemon_command);
  if (commands.status->parsed()) {
    double watch_seconds = commands.watch_seconds;
    if (commands.status->count("--watch") > 0 && watch_seconds <= 0) watch_seconds = 2;
    return what_was_written(
        "cohort status",
        status_command(commands.status_query, commands.status_token_file, watch_seconds));
  }
  if (commands.stop->parsed())
    return what_was_written("cohort stop", stop_command(commands.stop_query));
  if (commands.doctor->parsed()) {
    commands.doctor_options.expect_ranks_given = commands.doctor->count("--expect-ranks") > 0;
    commands.doctor_options.endpoint_given = commands.doctor->count("--rdzv-endpoint") > 0;
    return what_was_written("cohort doctor", run_doctor_command(commands.doctor_options));
  }
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // The keeper an agent spawned (process/keeper_process.hpp), before any flag is parsed.
  if (argc >= 2 && argv[1] == kKeeperCommand) return run_keeper_process(argc, argv);
  CLI::App app{"cohort: a fast, elastic launcher for distributed PyTorch and LibTorch training",
               "cohort"};
  Commands commands;
  declare_commands(app, commands);
  if (std::optional<int> exit_code = parse_command_line(app, argc, argv)) return *exit_code;
  return dispatch(app, commands);
}
