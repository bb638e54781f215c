// cohort: the launcher's entry point. Declares the subcommands and their flags, parses the
// command line, and hands each subcommand to its own file (run_command, launch_command,
// status_command, rendezvous_command, stop_command, doctor_command), whose result is the exit
// code.
#include <CLI/CLI.hpp>
#include <iostream>

#include "agent/worker_env.hpp"
#include "cohort_version.hpp"  // generated: the version, commit and build type
#include "common/exit_codes.hpp"
#include "launcher/cli/doctor_command.hpp"
#include "launcher/cli/launch_command.hpp"
#include "launcher/cli/rendezvous_command.hpp"
#include "launcher/cli/run_command.hpp"
#include "launcher/cli/status_command.hpp"
#include "launcher/cli/status_watch.hpp"
#include "launcher/cli/stop_command.hpp"
#include "launcher/options/did_you_mean.hpp"
#include "launcher/options/flag_abbreviations.hpp"
#include "launcher/options/help_format.hpp"
#include "launcher/tokens/slurm_token.hpp"
#include "launcher/tokens/token_source.hpp"

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

int status_command(StatusQuery query, const std::string& token_file, double watch_seconds) {
  std::optional<std::string> token = query_token("status", token_file);
  if (!token) return kExitUsage;
  query.token = *token;
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
  return watch_status(query, std::chrono::milliseconds(static_cast<int64_t>(watch_seconds * 1000)));
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cohort: a fast, elastic launcher for distributed PyTorch and LibTorch training",
               "cohort"};
  app.require_subcommand(1);
  app.allow_extras();  // "cohort run -- script args": after "--" the words land here
  app.set_version_flag("--version", std::string("cohort ") + COHORT_VERSION + " (commit " +
                                        COHORT_COMMIT + ", " + COHORT_BUILD_TYPE + " build)");

  RunOptions run_options;
  CLI::App* run =
      app.add_subcommand("run", "Run the workers of this node (a drop-in for torchrun)");
  run->formatter(std::make_shared<ScriptUsageFormatter>());
  add_run_flags(*run, run_options);

  LaunchOptions launch_options;
  CLI::App* launch = app.add_subcommand(
      "launch", "Run `cohort run` on several hosts over ssh, from this machine (like mpirun)");
  launch->formatter(std::make_shared<ScriptUsageFormatter>());
  add_launch_flags(*launch, launch_options);

  DaemonCommand daemon_command;
  CLI::App* rendezvous =
      app.add_subcommand("rendezvous", "Run the rendezvous daemon (the same as cohortd)");
  add_daemon_flags(*rendezvous, daemon_command);

  StatusQuery status_query;
  std::string status_token_file;
  CLI::App* status = app.add_subcommand("status", "Show what a rendezvous daemon knows");
  status
      ->add_option("--rdzv-endpoint,--rdzv_endpoint", status_query.endpoint,
                   "host[:port] of the daemon")
      ->capture_default_str();
  status->add_option("--rdzv-id,--rdzv_id", status_query.run_id,
                     "Only this run (what a run's token may see)");
  status->add_option("--token-file", status_token_file,
                     "The daemon's or the run's token (default: $COHORT_TOKEN)");
  status->add_flag("--json", status_query.json, "Print the raw JSON");
  status->add_option("--events", status_query.events_run,
                     "Print the history of run RUN from the daemon, an event a line (JSON lines "
                     "with --json)");
  double watch_seconds = 0;
  status
      ->add_option("--watch", watch_seconds,
                   "Redraw a compact table every SECONDS (default 2) until Ctrl-C")
      ->expected(0, 1)
      ->default_str("2")
      ->check(CLI::Range(0.2, 3600.0).description(""));

  StopQuery stop_query;
  CLI::App* stop =
      app.add_subcommand("stop", "End a run cleanly: every node stops its workers and exits 130");
  add_stop_flags(*stop, stop_query);

  DoctorOptions doctor_options;
  CLI::App* doctor = app.add_subcommand(
      "doctor",
      "Check this node before trusting it: GPUs, cgroups, topology, limits, torch, tools");
  add_doctor_flags(*doctor, doctor_options);

  if (unknown_command(app, argc, argv)) return kExitUsage;
  std::string command = command_name(app, argc, argv);
  app.failure_message([command](const CLI::App*, const CLI::Error& error) {
    return parse_error_message(command, error);
  });
  std::vector<std::string> words = expanded_words(app, argc, argv);
  if (words.empty()) return kExitUsage;
  std::vector<char*> args;
  for (std::string& word : words) args.push_back(word.data());
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? kExitSuccess : kExitUsage;
  }
  if (run->parsed()) return run_command(*run, run_options);
  if (launch->parsed()) return launch_command(*launch, launch_options);
  if (refused_extras(*rendezvous) || refused_extras(*status) || refused_extras(*stop) ||
      refused_extras(*doctor))
    return kExitUsage;
  if (!app.remaining().empty()) {
    std::cerr << "cohort: unexpected arguments: " << CLI::detail::join(app.remaining(), " ")
              << "\n";
    return kExitUsage;
  }
  if (rendezvous->parsed()) return run_daemon(daemon_command);
  if (status->parsed()) {
    if (status->count("--watch") > 0 && watch_seconds <= 0) watch_seconds = 2;
    return status_command(status_query, status_token_file, watch_seconds);
  }
  if (stop->parsed()) {
    std::optional<std::string> token = query_token("stop", stop_query.token_file);
    if (!token) return kExitUsage;
    stop_query.token = *token;
    stop_query.by = stop_requester();
    return run_stop_command(stop_query);
  }
  if (doctor->parsed()) {
    doctor_options.expect_ranks_given = doctor->count("--expect-ranks") > 0;
    doctor_options.endpoint_given = doctor->count("--rdzv-endpoint") > 0;
    return run_doctor_command(doctor_options);
  }
  return kExitUsage;
}
