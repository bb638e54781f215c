#include "launcher/run_options.hpp"

#include <cctype>

namespace cohort {
namespace {

// "--nproc-per-node" -> "--nproc-per-node,--nproc_per_node"; env PET_NPROC_PER_NODE.
std::string both_spellings(const std::string& dashed) {
  std::string underscored = dashed;
  for (size_t i = 2; i < underscored.size(); ++i) {
    if (underscored[i] == '-') underscored[i] = '_';
  }
  return underscored == dashed ? dashed : dashed + "," + underscored;
}

std::string pet_name(const std::string& dashed) {
  std::string name = "PET_";
  for (char c : dashed.substr(2)) name += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return name;
}

template <typename T>
CLI::Option* flag_option(CLI::App& app, const std::string& dashed, T& value,
                         const std::string& help, const std::string& short_name = "") {
  std::string names =
      short_name.empty() ? both_spellings(dashed) : short_name + "," + both_spellings(dashed);
  return app.add_option(names, value, help)->envname(pet_name(dashed))->capture_default_str();
}

CLI::Option* bool_flag(CLI::App& app, const std::string& dashed, bool& value,
                       const std::string& help, const std::string& short_name = "") {
  std::string names =
      short_name.empty() ? both_spellings(dashed) : short_name + "," + both_spellings(dashed);
  return app.add_flag(names, value, help)->envname(pet_name(dashed));
}

}  // namespace

void add_run_flags(CLI::App& app, RunOptions& o) {
  flag_option(app, "--nnodes", o.nnodes, "Number of nodes, N or MIN:MAX");
  flag_option(app, "--nproc-per-node", o.nproc_per_node,
              "Workers per node: a number, 'gpu', 'cpu' or 'auto'");
  flag_option(app, "--rdzv-backend", o.rdzv_backend, "Rendezvous backend: c10d or static");
  flag_option(app, "--rdzv-endpoint", o.rdzv_endpoint, "Rendezvous endpoint, host[:port]");
  flag_option(app, "--rdzv-id", o.rdzv_id, "Run id shared by every node of the job");
  flag_option(app, "--rdzv-conf", o.rdzv_conf, "Rendezvous settings, key=value,...");
  bool_flag(app, "--standalone", o.standalone,
            "Single node: a private rendezvous and a random run id");
  flag_option(app, "--max-restarts", o.max_restarts, "Failure restarts before the run fails");
  flag_option(app, "--monitor-interval", o.monitor_interval,
              "Accepted for torchrun compatibility; cohort reacts to worker exits at once");
  flag_option(app, "--start-method", o.start_method, "Accepted for torchrun compatibility");
  flag_option(app, "--role", o.role, "Worker role name (ROLE_NAME, log prefix)");
  bool_flag(app, "--module", o.module, "Run the script as 'python -m MODULE'", "-m");
  bool_flag(app, "--no-python", o.no_python, "Execute the script directly, not through python");
  bool_flag(app, "--run-path", o.run_path, "Accepted for torchrun compatibility (runs the script)");
  flag_option(app, "--log-dir", o.log_dir,
              "Base directory of per-attempt, per-rank log files and error files");
  flag_option(app, "--redirects", o.redirects,
              "Streams to files only: 0 none, 1 stdout, 2 stderr, 3 both; or RANK:N,...", "-r");
  flag_option(app, "--tee", o.tee, "Streams to files and the console; same values", "-t");
  flag_option(app, "--local-ranks-filter", o.local_ranks_filter,
              "Only these local ranks reach the console, e.g. 0,1");
  flag_option(app, "--node-rank", o.node_rank, "Node rank (static rendezvous)");
  flag_option(app, "--master-addr", o.master_addr, "Address of node rank 0 (static rendezvous)");
  flag_option(app, "--master-port", o.master_port, "Port of node rank 0 (static rendezvous)");
  flag_option(app, "--local-addr", o.local_addr, "Address this node advertises, used as given");
  flag_option(app, "--shutdown-timeout", o.shutdown_timeout,
              "Seconds between the stop signal and SIGKILL (default: "
              "$TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30)")
      ->default_str("30");
  // Hang detection (README: "Hangs and stragglers").
  flag_option(app, "--hang-timeout", o.hang_timeout,
              "Seconds without a sign of life (a heartbeat, an output line) after which a worker "
              "is hung: its stacks are taken and it fails (0: off)");
  flag_option(app, "--hang-first-timeout", o.hang_first_timeout,
              "Seconds a worker may take to its first sign of life (default: 10 x --hang-timeout)")
      ->default_str("10 x --hang-timeout");
  flag_option(app, "--max-same-failures", o.max_same_failures,
              "The same failure (exit status and last stderr line) this many times in a row ends "
              "the run, whatever restarts are left (0: off)");
  flag_option(app, "--no-restart-exit-codes", o.no_restart_exit_codes,
              "Exit codes that end the run at once, e.g. 2,3 (a bad configuration, not a crash)");
  flag_option(app, "--min-uptime", o.min_uptime,
              "Seconds: a worker failing sooner after its start is reported as a start-up "
              "failure (0: off)");
  flag_option(app, "--signals-to-handle", o.signals_to_handle,
              "Signals forwarded to the workers; INT, TERM, HUP, QUIT also stop them");
  flag_option(app, "--event-log-handler", o.event_log_handler,
              "Accepted for torchrun compatibility");
  flag_option(app, "--worker-store", o.worker_store,
              "Where the workers' TCPStore lives: 'daemon' (a fresh one per round, hosted by the "
              "rendezvous) or 'rank0' (worker rank 0 binds MASTER_PORT)");
  flag_option(app, "--store-ports", o.store_ports,
              "Ports for the per-round worker stores of a daemon this agent hosts, e.g. "
              "29500-29599 (default: any free port)");
  flag_option(app, "--store-quota", o.store_quota,
              "Bytes each round's worker store may hold (keys, values, queues), with an optional "
              "K, M or G suffix; for a daemon this agent hosts");
  app.add_option("--token-file", o.token_file,
                 "The run's shared secret, proven to the rendezvous (a file only its owner can "
                 "read; default: $COHORT_TOKEN)");
  app.add_flag("--insecure", o.insecure,
               "Host a rendezvous that other hosts reach without a token (anyone who reaches it "
               "can steer the run)");
  app.add_flag("--node-rank-hint", o.node_rank_hint,
               "With c10d, take --node-rank as this node's preferred rank (cohort launch sets it)");
  app.add_flag("--under-launch", o.under_launch,
               "Set by cohort launch on every host: stop when stdin (the ssh connection) closes, "
               "and leave what every host would repeat to the launcher");
  app.add_flag("--raw-output", o.raw_output,
               "Worker output unprefixed and unbuffered (inherits cohort's stdout/stderr)");
  app.add_flag("-v,--verbose", o.verbose, "More of cohort's own messages (-vv: debug)");
  app.add_flag("-q,--quiet", o.quiet, "Only errors from cohort itself");
  app.prefix_command();
  app.footer(
      "\nEverything from the first non-flag argument on is the training script and its "
      "arguments;\n'${local_rank}' in them becomes each worker's local rank.");
}

std::string take_command(const std::vector<std::string>& remaining, RunOptions& options) {
  std::vector<std::string> command = remaining;
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  if (command.empty()) return "missing the training script: cohort run [flags] SCRIPT [ARGS...]";
  if (command.front().size() > 1 && command.front()[0] == '-' && remaining.front() != "--") {
    return "unknown flag '" + command.front() + "' (see cohort run --help)";
  }
  options.command = std::move(command);
  return {};
}

log::Level log_level_for(const RunOptions& options) {
  if (options.quiet) return log::Level::Error;
  if (options.verbose > 1) return log::Level::Debug;
  if (options.verbose == 1) return log::Level::Info;
  return log::level_from_env(log::Level::Warn);
}

}  // namespace cohort
