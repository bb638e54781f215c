#include "launcher/options/run_options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <type_traits>

#include "launcher/options/did_you_mean.hpp"
#include "launcher/options/foreign_flags.hpp"
#include "proto/control_messages.hpp"

namespace cohort {
namespace {

// "--nproc-per-node" -> "--nproc-per-node,--nproc_per_node", with a short name first if any.
std::string names_of(const std::string& dashed, const std::string& short_name) {
  std::string underscored = dashed;
  for (size_t i = 2; i < underscored.size(); ++i) {
    if (underscored[i] == '-') underscored[i] = '_';
  }
  std::string names = underscored == dashed ? dashed : dashed + "," + underscored;
  return short_name.empty() ? names : short_name + "," + names;
}

// CLI11 reads "" as 0; argparse refuses it, and an empty variable in a script is a mistake.
const CLI::Validator kNotEmpty(
    [](const std::string& text) {
      return text.empty() ? std::string("expected a number, got ''") : "";
    },
    "", "not empty");

// An operator's command: "--token-file=" (an unset variable in a script) is a mistake, never a
// way to say "the default".
const CLI::Validator kGivenValue(
    [](const std::string& text) {
      return text.empty() ? std::string("expected a value, got ''") : "";
    },
    "", "given");

// A flag with one value. Given twice, the last one wins, as with torchrun's argparse
// (`--nproc-per-node=2 --nproc-per-node=1` runs one worker).
template <typename T>
CLI::Option* flag_option(CLI::App& app, const std::string& dashed, T& value,
                         const std::string& help, const std::string& short_name = "") {
  CLI::Option* option = app.add_option(names_of(dashed, short_name), value, help)
                            ->envname(pet_name(dashed))
                            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                            ->capture_default_str();
  if constexpr (std::is_arithmetic_v<T>) option->check(kNotEmpty);
  return option;
}

template <typename T>
CLI::Option* bool_flag(CLI::App& app, const std::string& dashed, T& value, const std::string& help,
                       const std::string& short_name = "") {
  return app.add_flag(names_of(dashed, short_name), value, help)->envname(pet_name(dashed));
}

// An internal flag: accepted (cohort launch and Slurm set it), not shown by --help.
CLI::Option* hidden(CLI::Option* option) { return option->group(""); }

void add_size_and_rendezvous_flags(CLI::App& app, RunOptions& o) {
  flag_option(app, "--nnodes", o.nnodes, "Number of nodes, N or MIN:MAX");
  flag_option(app, "--nproc-per-node", o.nproc_per_node,
              "Workers per node: a number, 'gpu', 'cpu', 'auto', or an accelerator (xpu, hpu, "
              "npu, ...) counted from its visible-devices variable");
  flag_option(app, "--rdzv-backend", o.rdzv_backend, "Rendezvous backend: c10d or static");
  flag_option(app, "--rdzv-endpoint", o.rdzv_endpoint, "Rendezvous endpoint, host[:port]");
  flag_option(app, "--rdzv-fallback", o.rdzv_fallback,
              "host[:port],...: where the rendezvous moves, in order, when the daemon at "
              "--rdzv-endpoint is lost (the agent on that host hosts it); after the first round a "
              "round then needs more than half of the last one's members back")
      ->type_name("LIST");
  flag_option(app, "--rdzv-id", o.rdzv_id,
              "Run id shared by every node of the job (default: 'none', as torchrun's; "
              "--standalone: a random one)")
      ->type_name("ID")
      ->default_str("");
  flag_option(app, "--rdzv-conf", o.rdzv_conf, "Rendezvous settings, key=value,...");
  bool_flag(app, "--standalone", o.standalone,
            "Single node: a private rendezvous and a random run id");
  flag_option(app, "--max-restarts", o.max_restarts, "Failure restarts before the run fails");
  flag_option(app, "--monitor-interval", o.monitor_interval,
              "Accepted for torchrun compatibility; cohort reacts to worker exits at once");
  flag_option(app, "--start-method", o.start_method,
              "Accepted for torchrun compatibility (spawn, fork or forkserver)");
  flag_option(app, "--event-log-handler", o.event_log_handler,
              "null, console (events on stderr as JSON lines, docs/EVENTS.md) or "
              "dynamic_rendezvous (as null)");
  flag_option(app, "--health-check", o.health_check,
              "A command (/bin/sh -c) that must exit 0 before this node joins each round; "
              "while it fails the node stays out, says why, and checks again");
  flag_option(app, "--health-check-timeout", o.health_check_timeout,
              "Seconds the health check may take before it is killed, and NVML to answer the "
              "built-in GPU checks (past it, the node is unhealthy)");
  flag_option(app, "--health-check-interval", o.health_check_interval,
              "Seconds between health checks while the node is unhealthy");
  flag_option(app, "--host-failure-limit", o.host_failure_limit,
              "Root-cause worker failures after which a host sits out a cooldown and a spare takes "
              "its place (0: never)");
  flag_option(app, "--host-exclusion-cooldown", o.host_exclusion_cooldown,
              "Seconds an excluded host sits out, doubled at each exclusion of the same host");
  flag_option(app, "--gpu-reclaim-timeout", o.gpu_reclaim_timeout,
              "Seconds a GPU may stay held by a process of the previous round before the node is "
              "unhealthy (the built-in GPU checks run before each round when NVML sees GPUs)");
  flag_option(app, "--event-log", o.event_log,
              "Append this node's events, and those of the rendezvous it hosts, to this file "
              "(JSON lines, docs/EVENTS.md)");
  flag_option(app, "--http-port", o.http_port,
              "When this node hosts the rendezvous (also at a --rdzv-fallback): serve /metrics "
              "and the timeline pages on 127.0.0.1 at this port (0: any free port; default: off)")
      ->type_name("PORT")
      ->default_str("");
  flag_option(app, "--role", o.role, "Worker role name (ROLE_NAME, log prefix)");
}

void add_worker_flags(CLI::App& app, RunOptions& o) {
  bool_flag(app, "--module", o.module, "Run the script as 'python -m MODULE'", "-m");
  bool_flag(app, "--no-python", o.no_python, "Execute the script directly, not through python");
  bool_flag(app, "--run-path", o.run_path,
            "Run the script's file in python, whatever -m and --no-python say (as torchrun)");
  bool_flag(app, "--virtual-local-rank", o.virtual_local_rank,
            "Every worker gets LOCAL_RANK=0 and sees only its own GPU (CUDA_VISIBLE_DEVICES)");
  flag_option(app, "--numa-binding", o.numa_binding,
              "Bind each worker's CPUs and memory near GPU LOCAL_RANK (as torchrun): node, "
              "socket, exclusive or core-complex");
  flag_option(app, "--cpu-bind", o.cpu_bind,
              "CPU-only runs: none, cores (each worker an even share of the cores of its own) "
              "or numa (workers round-robin over NUMA nodes)");
  bool_flag(app, "--report-bindings", o.report_bindings,
            "Print each worker's rank, GPU, NUMA node and CPUs on stderr at each round's start");
  flag_option(app, "--shutdown-timeout", o.shutdown_timeout,
              "Seconds between the stop signal and SIGKILL (default: "
              "$TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30)")
      ->default_str("30");
  flag_option(app, "--signals-to-handle", o.signals_to_handle,
              "Signals forwarded to the workers; INT, TERM, HUP, QUIT also stop them");
}

void add_output_flags(CLI::App& app, RunOptions& o) {
  flag_option(app, "--log-dir", o.log_dir,
              "Base directory of per-attempt, per-rank log files and error files");
  flag_option(app, "--redirects", o.redirects,
              "Streams to files only: 0 none, 1 stdout, 2 stderr, 3 both; or RANK:N,...", "-r");
  flag_option(app, "--tee", o.tee, "Streams to files and the console; same values", "-t");
  flag_option(app, "--local-ranks-filter", o.local_ranks_filter,
              "Only these local ranks reach the console, e.g. 0,1");
  flag_option(app, "--duplicate-stdout-filters", o.duplicate_stdout_filters,
              "Also copy stdout lines containing any of these (comma list, ',,' for a comma) to "
              "filtered_stdout.log in the attempt's log directory");
  flag_option(app, "--duplicate-stderr-filters", o.duplicate_stderr_filters,
              "The same for stderr (filtered_stderr.log)");
  flag_option(
      app, "--log-line-prefix-template", o.log_line_prefix_template,
      "Console line prefix: ${role_name}, ${rank}, ${local_rank}, ${hostname}, ${pid} "
      "(default: $TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, else [${role_name}${local_rank}]:)");
  flag_option(app, "--logs-specs", o.logs_specs,
              "A torchrun Python log plugin: accepted and ignored (a warning)");
  bool_flag(app, "--raw-output", o.raw_output,
            "Worker output unprefixed and unbuffered (inherits cohort's stdout/stderr)");
}

void add_static_flags(CLI::App& app, RunOptions& o) {
  flag_option(app, "--node-rank", o.node_rank, "Node rank (static rendezvous)");
  flag_option(app, "--master-addr", o.master_addr, "Address of node rank 0 (static rendezvous)");
  flag_option(app, "--master-port", o.master_port, "Port of node rank 0 (static rendezvous)");
  flag_option(app, "--local-addr", o.local_addr, "Address this node advertises, used as given");
}

// Hang detection and crash loops (README: "Hangs and stragglers").
void add_hang_flags(CLI::App& app, RunOptions& o) {
  flag_option(app, "--hang-timeout", o.hang_timeout,
              "Seconds without a sign of life (a heartbeat, an output line) after which a worker "
              "is hung: its stacks are taken and it fails (0: off)");
  flag_option(app, "--hang-first-timeout", o.hang_first_timeout,
              "Seconds a worker may take to its first sign of life (default: 10 x --hang-timeout)")
      ->default_str("10 x --hang-timeout");
  flag_option(app, "--hang-dump-timeout", o.hang_dump_timeout,
              "Seconds a hang waits for the NCCL flight recorder's dumps it asked for before the "
              "hung worker is stopped (0: do not wait)");
  flag_option(app, "--straggler-factor", o.straggler_factor,
              "A rank whose step time stays this many times the run's median for a minute is "
              "named as a straggler in the rendezvous's log (above 1)");
  flag_option(app, "--max-same-failures", o.max_same_failures,
              "The same failure (exit status and last stderr line) this many times in a row ends "
              "the run, whatever restarts are left (0: off)");
  flag_option(app, "--no-restart-exit-codes", o.no_restart_exit_codes,
              "Exit codes that end the run at once, e.g. 2,3 (a bad configuration, not a crash)");
  flag_option(app, "--min-uptime", o.min_uptime,
              "Seconds: a worker failing sooner after its start is reported as a start-up "
              "failure (0: off)");
}

void add_cohort_flags(CLI::App& app, RunOptions& o) {
  flag_option(app, "--worker-store", o.worker_store,
              "Where the workers' TCPStore lives: 'daemon' (a fresh one per round, hosted by the "
              "rendezvous) or 'rank0' (worker rank 0 binds MASTER_PORT; also "
              "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1)");
  flag_option(app, "--store-ports", o.store_ports,
              "Ports for the per-round worker stores of a daemon this agent hosts, e.g. "
              "29500-29599 (default: any free port)");
  flag_option(app, "--store-quota", o.store_quota,
              "Bytes each round's worker store may hold (keys, values, queues), with an optional "
              "K, M or G suffix; for a daemon this agent hosts");
  flag_option(app, "--store-budget", o.store_budget,
              "Bytes the worker stores of a daemon this agent hosts may hold together, all runs' "
              "rounds; K, M or G suffix");
  flag_option(app, "--token-file", o.token_file,
              "The run's shared secret, proven to the rendezvous (a file only its owner can "
              "read; default: $COHORT_TOKEN)");
  bool_flag(app, "--insecure", o.insecure,
            "Host a rendezvous that other hosts reach without a token (anyone who reaches it "
            "can steer the run)");
  hidden(bool_flag(app, "--node-rank-hint", o.node_rank_hint,
                   "With c10d, take --node-rank as this node's preferred rank"));
  hidden(bool_flag(app, "--under-launch", o.under_launch,
                   "Set by cohort launch on every host: stop when stdin closes"));
  hidden(flag_option(app, "--token-wait-ms", o.token_wait_ms,
                     "Set by cohort launch: how long to wait for the token line on stdin")
             ->check(CLI::Range(int64_t{0}, int64_t{7200000})));
  hidden(flag_option(app, "--launched-ms-ago", o.launched_ms_ago,
                     "Set by cohort launch on a lost host it starts again: the job's age")
             ->check(CLI::Range(int64_t{0}, proto::kMaxAgentAgeMs)));
  bool_flag(app, "--verbose", o.verbose, "More of cohort's own messages (-vv: debug)", "-v");
  bool_flag(app, "--quiet", o.quiet, "Only errors from cohort itself", "-q");
}

}  // namespace

std::string pet_name(const std::string& dashed) {
  std::string name = "PET_";
  for (char c : dashed.substr(2)) name += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return name;
}

void add_run_flags(CLI::App& app, RunOptions& o) {
  // With a callback of its own, a subcommand reads its flags' PET_* variables only when it is
  // the one given: CLI11 otherwise reads them for every subcommand that has none, so a bad
  // PET_MAX_RESTARTS failed `cohort launch` and `cohort status` too, and `cohort run
  // --max-restarts 1` through launch's --max-restarts. A flag given still wins over its variable,
  // which is then not read at all.
  app.parse_complete_callback([] {});
  add_size_and_rendezvous_flags(app, o);
  add_worker_flags(app, o);
  add_output_flags(app, o);
  add_static_flags(app, o);
  add_hang_flags(app, o);
  add_cohort_flags(app, o);
  app.prefix_command();
  // No leading newline: CLI11 already ends the options with one more, for the hidden group.
  app.footer(
      "SCRIPT and everything after it are the training script and its arguments; "
      "'${local_rank}'\nin them becomes each worker's local rank. Every flag has both spellings "
      "(--max-restarts,\n--max_restarts), reads PET_<NAME> (PET_MAX_RESTARTS) as its default, and "
      "may be shortened\nto an unambiguous prefix (--max-r).");
}

namespace {

// The script and its arguments without the one "--" that torchrun's argparse drops: the first
// word, or else the word right after the script (its positional takes a "--" on either side).
// Any other "--" is the script's own.
std::vector<std::string> without_separator(std::vector<std::string> words) {
  if (!words.empty() && words.front() == "--") {
    words.erase(words.begin());
  } else if (words.size() > 1 && words[1] == "--") {
    words.erase(words.begin() + 1);
  }
  return words;
}

}  // namespace

std::string take_command(const std::vector<std::string>& remaining, RunOptions& options,
                         const std::string& command_name, const std::vector<std::string>& flags) {
  std::vector<std::string> command = without_separator(remaining);
  if (command.empty()) {
    return "missing the training script: cohort " + command_name + " [OPTIONS] SCRIPT [ARGS...]";
  }
  if (command.front().size() > 1 && command.front()[0] == '-' && remaining.front() != "--") {
    std::string flag = command.front().substr(0, command.front().find('='));
    std::string close = closest_name(flag, flags);
    std::string hint = foreign_flag_hint(flag);
    if (hint.empty() && !close.empty()) hint = "did you mean " + close + "?";
    return "unknown flag '" + command.front() + "'" + (hint.empty() ? "" : " (" + hint + ")") +
           " (see cohort " + command_name + " --help)";
  }
  options.command = std::move(command);
  return {};
}

void refuse_empty_values(CLI::App& command) {
  for (CLI::Option* option : command.get_options()) {
    if (option->get_expected_min() > 0) option->check(kGivenValue);
  }
}

std::vector<std::string> apply_torch_env_defaults(const CLI::App& app, RunOptions& options,
                                                  const std::map<std::string, std::string>& env) {
  auto share = env.find("TORCH_DISABLE_SHARE_RDZV_TCP_STORE");
  if (share == env.end() || share->second != "1" || app.count("--worker-store") > 0) return {};
  options.worker_store = "rank0";
  return {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: --worker-store rank0"};
}

std::string flag_named_in(const std::string& text) {
  size_t start = text.find("--");
  if (start == std::string::npos) return "";
  size_t end = start + 2;
  while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                               text[end] == '-' || text[end] == '_'))
    ++end;
  return text.substr(start, end - start);
}

std::string env_origin(const CLI::App& app, const std::string& text,
                       const std::map<std::string, std::string>& env) {
  std::string flag = flag_named_in(text);
  if (flag.empty()) return "";
  const CLI::Option* option = app.get_option_no_throw(flag);
  if (option == nullptr || option->get_envname().empty()) return "";
  if (env.count(option->get_envname()) == 0) return "";
  const std::vector<CLI::Option*>& given = app.parse_order();  // the command line's, not env's
  if (std::find(given.begin(), given.end(), option) != given.end()) return "";
  return " (from " + option->get_envname() + " in the environment)";
}

log::Level log_level_for(const RunOptions& options) {
  if (options.quiet) return log::Level::Error;
  if (options.verbose > 1) return log::Level::Debug;
  if (options.verbose == 1) return log::Level::Info;
  return log::level_from_env(log::Level::Warn);
}

}  // namespace cohort
