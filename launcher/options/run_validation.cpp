#include "launcher/options/run_validation.hpp"

#include <algorithm>
#include <climits>
#include <csignal>
#include <set>

#include "common/event_log.hpp"
#include "common/host_port.hpp"
#include "common/run_id.hpp"
#include "common/signal_names.hpp"
#include "common/text.hpp"
#include "launcher/options/rdzv_conf.hpp"
#include "launcher/topology/accelerator_count.hpp"
#include "launcher/topology/binding_plan.hpp"
#include "launcher/topology/visible_gpus.hpp"
#include "proto/auth.hpp"
#include "proto/control_messages.hpp"

namespace cohort {
namespace {

using Problems = std::vector<std::string>;

int visible_gpus(const RunEnvironment& machine) {
  std::optional<std::string> visible = machine.var("CUDA_VISIBLE_DEVICES");
  return visible_gpu_count(machine.gpu_count(), visible ? visible->c_str() : nullptr);
}

// --nproc-per-node xpu (hpu, ...): the devices its visible-devices variable lists.
int accelerator_nproc(const std::string& name, const RunEnvironment& machine, Problems& problems) {
  std::string variable = accelerator_devices_variable(name);
  int count = listed_device_count(machine.var(variable).value_or(""));
  if (count == 0) {
    problems.push_back(cat("--nproc-per-node ", name, ": cannot count ", name,
                           " devices: ", variable,
                           " is unset or empty (cohort counts them from it; set it, or "
                           "give a number)"));
  }
  return count;
}

int resolve_nproc(const std::string& text, const RunEnvironment& machine, Problems& problems) {
  if (text == "cpu") return machine.cpu_count;
  if (text == "auto") {
    int count = visible_gpus(machine);
    return count > 0 ? count : machine.cpu_count;
  }
  if (text == "gpu") {
    int count = visible_gpus(machine);
    if (count == 0) {
      problems.push_back(
          "--nproc-per-node gpu: no GPU found (NVML reports none, or "
          "CUDA_VISIBLE_DEVICES hides them all)");
    }
    return count;
  }
  if (!accelerator_devices_variable(text).empty())
    return accelerator_nproc(text, machine, problems);
  auto number = parse_int(text);
  if (!number || *number < 1 || *number > 4096) {
    problems.push_back(
        cat("--nproc-per-node: expected a number from 1 to 4096, 'cpu', 'gpu', 'auto' or "
            "an accelerator (",
            accelerator_names(), "), got '", text, "'"));
    return 1;
  }
  return static_cast<int>(*number);
}

// $PYTHON_EXEC, else python3; a bare name is looked up in PATH (PYTHON_EXEC=python3 works, as it
// does for torchrun).
std::string python_executable(const RunEnvironment& machine) {
  std::string python = machine.var("PYTHON_EXEC").value_or("");
  if (python.empty()) python = "python3";
  if (python.find('/') != std::string::npos) return python;
  std::string found = machine.find_executable(python);
  return found.empty() ? python : found;
}

// "python", "python3", "/usr/bin/python3.11": a python interpreter by its name.
bool is_python_name(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  return name.rfind("python", 0) == 0 &&
         name.find_first_not_of("0123456789.", 6) == std::string::npos;
}

void build_command(const RunOptions& options, const RunEnvironment& machine, AgentConfig& config,
                   Problems& problems) {
  const std::string& target = options.command.front();
  std::vector<std::string> rest(options.command.begin() + 1, options.command.end());
  config.entrypoint_name = target;
  // torchrun's --run-path runs the script's file in python (runpy) whatever -m and --no-python
  // say; so does cohort, as python -u SCRIPT.
  bool module = options.module && !options.run_path;
  if (options.no_python && !options.run_path) {
    config.executable = machine.find_executable(target);
    if (config.executable.empty() && !options.module) {  // with -m: the conflict is said alone
      problems.push_back(cat("--no-python: '", target, "' is not an executable file",
                             target.find('/') == std::string::npos ? " in PATH" : ""));
    }
    config.args = rest;
    return;
  }
  // Said here, before this node joins a round: each worker's python would fail, and every
  // other node would restart with it. Not when $PYTHON_EXEC is no python* but a wrapper, which
  // may run python in a container, where other files are.
  std::string python = machine.var("PYTHON_EXEC").value_or("python3");
  bool plain_python = python.substr(python.rfind('/') + 1).rfind("python", 0) == 0;
  if (plain_python && !module && is_python_name(target)) {
    // horovodrun's and mpirun's habit ("... python train.py"): python would read itself.
    problems.push_back(cat("the training script is '", target,
                           "': cohort starts the script with python itself, so drop it"));
  } else if (plain_python && !module && !target.empty() && target[0] != '-' &&
             !machine.path_exists(target)) {
    problems.push_back(cat("the training script '", target,
                           "' does not exist here (give -m for a module, --no-python for a "
                           "program)"));
  }
  config.executable = python_executable(machine);
  config.python_worker = true;
  config.crash_loop.python = config.executable;
  config.args = {"-u"};
  if (module) config.args.push_back("-m");
  config.args.push_back(target);
  config.args.insert(config.args.end(), rest.begin(), rest.end());
}

void parse_outputs(const RunOptions& options, const RunEnvironment& machine, AgentConfig& config,
                   Problems& problems) {
  auto redirects = StdSpec::parse(options.redirects);
  if (!redirects) {
    problems.push_back(
        cat("--redirects: expected 0-3 or RANK:VALUE,..., got '", options.redirects, "'"));
  }
  auto tee = StdSpec::parse(options.tee);
  if (!tee)
    problems.push_back(cat("--tee: expected 0-3 or RANK:VALUE,..., got '", options.tee, "'"));
  if (redirects) config.output.redirects = *redirects;
  if (tee) config.output.tee = *tee;
  if (!options.local_ranks_filter.empty()) {
    for (const auto& item : split(options.local_ranks_filter, ',')) {
      auto rank = parse_int(trim(item));
      if (!rank || *rank < 0 || *rank > INT_MAX) {
        problems.push_back(cat("--local-ranks-filter: expected local ranks like 0,2, got '",
                               options.local_ranks_filter, "'"));
        break;
      }
      config.output.console_ranks.insert(static_cast<int>(*rank));
    }
  }
  config.output.raw = options.raw_output;
  if (!options.log_line_prefix_template.empty()) {
    config.output.prefix_template = options.log_line_prefix_template;
  } else if (auto prefix = machine.var("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");
             prefix && !prefix->empty()) {  // empty is unset, as for torchrun
    config.output.prefix_template = *prefix;
  }
  config.output.stdout_filters = parse_filter_list(options.duplicate_stdout_filters);
  config.output.stderr_filters = parse_filter_list(options.duplicate_stderr_filters);
  bool filters = !config.output.stdout_filters.empty() || !config.output.stderr_filters.empty();
  if (filters && options.raw_output) {
    problems.push_back(
        "--duplicate-stdout-filters/--duplicate-stderr-filters: cohort must read the output to "
        "filter it; not with --raw-output");
  }
}

// Flags cohort accepts for torchrun's sake without (fully) applying them.
void check_accepted_flags(const RunOptions& options, ValidatedRun& run) {
  if (!parse_numa_binding(options.numa_binding)) {
    run.problems.push_back(
        cat("--numa-binding: expected node, socket, exclusive or core-complex, "
            "got '",
            options.numa_binding, "'"));
  }
  if (!parse_cpu_bind(options.cpu_bind)) {
    run.problems.push_back(
        cat("--cpu-bind: expected none, cores or numa, got '", options.cpu_bind, "'"));
  } else if (options.cpu_bind != "none" && !options.numa_binding.empty()) {
    run.problems.push_back("--cpu-bind: not with --numa-binding (which binds near the GPUs)");
  }
  if (!options.logs_specs.empty() && options.logs_specs != "default") {  // torchrun's own
    run.warnings.push_back(cat("--logs-specs ", options.logs_specs,
                               ": a torchrun Python plugin; cohort has no plugins and ignores it "
                               "(its own log layout applies)"));
  }
  if (!options.event_log.empty()) {
    if (std::string problem = event_log_problem(options.event_log); !problem.empty())
      run.problems.push_back("--event-log: " + problem);
  }
  if (options.http_port < -1 || options.http_port > 65535) {
    run.problems.push_back(cat("--http-port: expected 0..65535, got ", options.http_port));
  }
  const std::string& handler = options.event_log_handler;
  if (handler != "null" && handler != "console" && handler != "dynamic_rendezvous") {
    run.problems.push_back(
        cat("--event-log-handler: expected null, console or dynamic_rendezvous, "
            "got '",
            handler, "'"));
  }
}

// --local-ranks-filter that names no local rank of this node shows no worker's output: said, as
// torchrun does not, but no error (nodes of another --nproc-per-node may have those ranks).
void check_console_ranks(const RunOptions& options, const AgentConfig& config, ValidatedRun& run) {
  const std::set<int>& shown = config.output.console_ranks;
  if (shown.empty() || config.nproc < 1 || *shown.begin() < config.nproc) return;
  run.warnings.push_back(cat("--local-ranks-filter ", options.local_ranks_filter,
                             ": no such local rank on this node (--nproc-per-node ", config.nproc,
                             "): no worker's output reaches the console (files, with --log-dir, "
                             "get everything)"));
}

// --virtual-local-rank: every worker needs a device of its own in CUDA_VISIBLE_DEVICES.
void check_virtual_local_rank(const RunOptions& options, const RunEnvironment& machine,
                              AgentConfig& config, Problems& problems) {
  config.env.virtual_local_rank = options.virtual_local_rank;
  if (!options.virtual_local_rank || config.nproc < 1) return;
  if (virtual_visible_device(machine.env, config.nproc - 1).empty()) {
    problems.push_back(cat("--virtual-local-rank: ", config.nproc,
                           " workers, but CUDA_VISIBLE_DEVICES lists fewer devices ('",
                           machine.var("CUDA_VISIBLE_DEVICES").value_or(""), "')"));
  }
}

void parse_signals(const RunOptions& options, AgentConfig& config, Problems& problems) {
  for (const auto& item : split(options.signals_to_handle, ',')) {
    auto signal = parse_signal(trim(item));
    if (!signal || *signal == SIGKILL || *signal == SIGSTOP || *signal == SIGCHLD) {
      problems.push_back(cat("--signals-to-handle: '", std::string(trim(item)),
                             "' is not a signal cohort can handle"));
      continue;
    }
    if (!is_termination_signal(*signal)) config.extra_signals.push_back(*signal);
  }
  for (int signal : {SIGUSR1, SIGUSR2}) {
    bool forwarded = std::find(config.extra_signals.begin(), config.extra_signals.end(), signal) !=
                     config.extra_signals.end();
    if (options.in_slurm_step && !forwarded) config.absorbed_signals.push_back(signal);
  }
  config.env.signals_to_handle = options.signals_to_handle;
}

std::chrono::milliseconds shutdown_timeout(const RunOptions& options, const RunEnvironment& machine,
                                           Problems& problems) {
  constexpr std::chrono::milliseconds kDefault(30000);
  if (options.shutdown_timeout) {
    if (auto timeout = seconds_to_ms(*options.shutdown_timeout)) return *timeout;
    problems.push_back(cat("--shutdown-timeout: expected seconds between 0 and a year, got ",
                           *options.shutdown_timeout));
    return kDefault;
  }
  std::optional<std::string> env = machine.var("TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
  if (!env) return kDefault;
  if (auto timeout = parse_seconds(*env)) return *timeout;
  problems.push_back(
      cat("TORCH_ELASTIC_SHUTDOWN_TIMEOUT: not a number of seconds up to a year: '", *env, "'"));
  return kDefault;
}

// The run id names the log directory and the run at the daemon: one plain path component.
std::string checked_run_id(const RunOptions& options, Problems& problems) {
  if (options.standalone) return random_run_id();
  if (std::string problem = run_id_problem(options.rdzv_id); !problem.empty()) {
    std::string shown = escape_for_terminal(options.rdzv_id.substr(0, 40));
    if (options.rdzv_id.size() > 40) shown += "...";
    problems.push_back(cat("--rdzv-id '", shown, "': ", problem));
  }
  return options.rdzv_id;
}

void check_rendezvous_flags(const RunOptions& options, Problems& problems) {
  if (options.rdzv_backend != "static" && options.rdzv_backend != "c10d") {
    if (options.rdzv_backend.rfind("etcd", 0) == 0) {
      problems.push_back(
          cat("--rdzv-backend ", options.rdzv_backend,
              ": etcd is not supported; cohort's own daemon replaces it (use c10d)"));
    } else {
      problems.push_back(
          cat("--rdzv-backend: expected 'c10d' or 'static', got '", options.rdzv_backend, "'"));
    }
  }
  if (options.start_method != "spawn" && options.start_method != "fork" &&
      options.start_method != "forkserver") {
    problems.push_back(cat("--start-method: expected spawn, fork or forkserver, got '",
                           options.start_method, "'"));
  }
  if (!(options.monitor_interval > 0) || !seconds_to_ms(options.monitor_interval)) {
    problems.push_back(
        cat("--monitor-interval: expected a positive number of seconds, at most a "
            "year, got ",
            options.monitor_interval));
  }
  if (options.max_restarts < 0) problems.push_back("--max-restarts: must be >= 0");
  if (options.node_rank < 0) problems.push_back("--node-rank: must be >= 0");
  for (const auto& [flag, host] : {std::pair{"--master-addr", &options.master_addr},
                                   std::pair{"--local-addr", &options.local_addr}}) {
    if (!host->empty() && !is_host_name(*host) && !is_ip_address(*host)) {
      problems.push_back(cat(flag, ": expected a host name or an address, got '", *host, "'"));
    }
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    problems.push_back(cat("--master-port: expected 0-65535, got ", options.master_port));
  }
  if (options.module && options.no_python && !options.run_path)
    problems.push_back("--module: cannot be combined with --no-python");
  if (options.worker_store != "daemon" && options.worker_store != "rank0") {
    problems.push_back(
        cat("--worker-store: expected 'daemon' or 'rank0', got '", options.worker_store, "'"));
  }
}

void parse_hang_dump_timeout(const RunOptions& options, AgentConfig& config, Problems& problems) {
  constexpr double kLongest = 3600;
  auto timeout = seconds_to_ms(options.hang_dump_timeout);
  if (!timeout || options.hang_dump_timeout > kLongest) {
    problems.push_back(cat("--hang-dump-timeout: expected seconds between 0 (do not wait) and ",
                           kLongest, ", got ", options.hang_dump_timeout));
    return;
  }
  config.hang.dump_timeout = *timeout;
}

void parse_hang_timeouts(const RunOptions& options, AgentConfig& config, Problems& problems) {
  auto timeout = seconds_to_ms(options.hang_timeout);
  if (!timeout) {
    problems.push_back(cat("--hang-timeout: expected seconds between 0 (off) and a year, got ",
                           options.hang_timeout));
    return;
  }
  config.hang.timeout = *timeout;
  config.hang.first_timeout = *timeout * 10;
  if (!options.hang_first_timeout) return;
  auto first = seconds_to_ms(*options.hang_first_timeout);
  if (!first || *first <= std::chrono::milliseconds(0)) {
    problems.push_back(
        cat("--hang-first-timeout: expected a positive number of seconds, at most "
            "a year, got ",
            *options.hang_first_timeout));
  } else if (options.hang_timeout == 0) {
    problems.push_back("--hang-first-timeout: needs --hang-timeout");
  } else {
    config.hang.first_timeout = *first;
  }
}

void parse_health_check(const RunOptions& options, AgentConfig& config, Problems& problems) {
  config.health.command = options.health_check;
  auto timeout = seconds_to_ms(options.health_check_timeout);
  if (!timeout || *timeout <= std::chrono::milliseconds(0)) {
    problems.push_back(cat("--health-check-timeout: expected a positive number of seconds, got ",
                           options.health_check_timeout));
  } else {
    config.health.timeout = *timeout;
  }
  auto interval = seconds_to_ms(options.health_check_interval);
  if (!interval || *interval < std::chrono::milliseconds(100)) {
    problems.push_back(cat("--health-check-interval: expected at least 0.1 seconds, got ",
                           options.health_check_interval));
  } else {
    config.health.interval = *interval;
  }
}

// The built-in GPU checks: over the GPUs CUDA_VISIBLE_DEVICES leaves (all of them when it names
// devices by UUID); the agent turns them off when NVML sees no GPU.
void parse_gpu_health(const RunOptions& options, const RunEnvironment& machine, AgentConfig& config,
                      Problems& problems) {
  auto reclaim = seconds_to_ms(options.gpu_reclaim_timeout);
  if (!reclaim) {
    return problems.push_back(cat("--gpu-reclaim-timeout: expected seconds from 0 to a year, got ",
                                  options.gpu_reclaim_timeout));
  }
  config.gpu_health.reclaim_timeout = *reclaim;
  auto answer = seconds_to_ms(options.health_check_timeout);  // said by parse_health_check if bad
  if (answer && *answer > std::chrono::milliseconds(0)) config.gpu_health.answer_timeout = *answer;
  // NVML is asked by the agent, off the launch path; how many GPUs it sees decides there.
  config.gpu_health.visible = [visible = machine.var("CUDA_VISIBLE_DEVICES")](int physical) {
    auto indices = visible_gpu_indices(physical, visible ? visible->c_str() : nullptr);
    if (!indices) indices = visible_gpu_indices(physical, nullptr);  // by UUID: every GPU
    return *indices;
  };
}

void parse_straggler_factor(const RunOptions& options, AgentConfig& config, Problems& problems) {
  double percent = options.straggler_factor * 100;
  if (!(percent >= proto::kMinStragglerFactorPercent &&
        percent <= proto::kMaxStragglerFactorPercent)) {
    problems.push_back(
        cat("--straggler-factor: expected a number from 1.01 to 1000 (1.5: half "
            "again the run's median step time), got ",
            options.straggler_factor));
    return;
  }
  config.straggler_factor_pct = static_cast<int>(percent + 0.5);
}

void parse_crash_loop(const RunOptions& options, AgentConfig& config, Problems& problems) {
  if (options.max_same_failures < 0)
    problems.push_back(cat("--max-same-failures: must be >= 0, got ", options.max_same_failures));
  config.crash_loop.max_same_failures = options.max_same_failures;
  if (!options.no_restart_exit_codes.empty()) {
    for (const auto& item : split(options.no_restart_exit_codes, ',')) {
      auto code = parse_int(trim(item));
      if (!code || *code < 1 || *code > 255) {
        problems.push_back(cat("--no-restart-exit-codes: expected exit codes 1-255 like 2,3, got '",
                               options.no_restart_exit_codes, "'"));
        break;
      }
      config.crash_loop.final_exit_codes.insert(static_cast<int>(*code));
    }
  }
  if (auto uptime = seconds_to_ms(options.min_uptime)) {
    config.crash_loop.min_uptime = *uptime;
  } else {
    problems.push_back(
        cat("--min-uptime: expected seconds between 0 (off) and a year, got ", options.min_uptime));
  }
}

// validate_run_flags, keeping --rdzv-conf for the rendezvous plan that may follow.
struct CheckedFlags {
  ValidatedRun run;
  RdzvConf conf;
};

CheckedFlags check_flags(const RunOptions& options, const RunEnvironment& machine) {
  CheckedFlags checked;
  AgentConfig& config = checked.run.config;
  Problems& problems = checked.run.problems;
  auto [min_nodes, max_nodes] = parse_nnodes(options.nnodes, problems);
  if (options.standalone && min_nodes == 1 && max_nodes > 1)
    checked.run.notes.push_back(cat("--standalone: runs on one node; --nnodes ", options.nnodes,
                                    " taken as 1, as torchrun takes it"));
  check_rendezvous_flags(options, problems);
  config.nproc = resolve_nproc(options.nproc_per_node, machine, problems);
  config.env.local_world_size = config.nproc;
  config.env.role = options.role;
  config.env.max_restarts = options.max_restarts;
  config.env.run_id = checked_run_id(options, problems);
  config.shutdown_timeout = shutdown_timeout(options, machine, problems);
  config.log_dir = options.log_dir;
  parse_outputs(options, machine, config, problems);
  check_console_ranks(options, config, checked.run);
  parse_signals(options, config, problems);
  check_accepted_flags(options, checked.run);
  check_virtual_local_rank(options, machine, config, problems);
  config.console_events = options.event_log_handler == "console";
  parse_hang_timeouts(options, config, problems);
  parse_hang_dump_timeout(options, config, problems);
  parse_health_check(options, config, problems);
  parse_gpu_health(options, machine, config, problems);
  parse_straggler_factor(options, config, problems);
  parse_crash_loop(options, config, problems);
  config.under_launch = options.under_launch;
  config.launch_age = std::chrono::milliseconds(options.launched_ms_ago);
  checked.conf = parse_rdzv_conf(options.rdzv_conf, problems);
  for (const std::string& key : checked.conf.unknown_keys) {
    checked.run.warnings.push_back(cat("--rdzv-conf: unknown key '", key,
                                       "' ignored (accepted, as torchrun accepts any key)"));
  }
  plan_rendezvous_settings(options, min_nodes, max_nodes, checked.conf, config.rendezvous,
                           checked.run.daemon, problems);
  config.event_log = options.event_log;
  checked.run.daemon.options.event_log = options.event_log;
  checked.run.daemon.options.http_port = options.http_port;
  return checked;
}

// --numa-binding / --cpu-bind: each local rank's CPUs and memory nodes, from this machine's
// topology; a plan that cannot be made stops the run before anything starts.
void plan_binding(const RunOptions& options, const RunEnvironment& machine, AgentConfig& config,
                  Problems& problems) {
  config.report_bindings = options.report_bindings;
  auto numa = parse_numa_binding(options.numa_binding);
  auto cpu = parse_cpu_bind(options.cpu_bind);
  if (!numa || !cpu || (*numa == NumaBinding::kNone && *cpu == CpuBind::kNone)) return;
  std::string flag = *numa != NumaBinding::kNone ? "--numa-binding " + options.numa_binding
                                                 : "--cpu-bind " + options.cpu_bind;
  std::string error;
  std::optional<MachineTopology> topology = machine.topology(error);
  if (!topology) return problems.push_back(cat(flag, ": ", error));
  if (*numa != NumaBinding::kNone && topology->gpus.empty()) {
    return problems.push_back(
        cat(flag,
            ": no GPU found (NVML reports none); it binds each worker near its GPU and, as with "
            "torchrun, cannot without one (--cpu-bind binds CPU-only runs)"));
  }
  BindingRequest request{*numa, *cpu, config.nproc, machine.var("CUDA_VISIBLE_DEVICES")};
  BindingPlan plan = plan_bindings(*topology, request);
  if (!plan.problem.empty()) return problems.push_back(plan.problem);
  config.bindings = std::move(plan.ranks);
}

}  // namespace

std::pair<int, int> parse_nnodes(const std::string& text, Problems& problems) {
  auto parts = split(text, ':');
  std::optional<int64_t> low = parse_int(parts[0]);
  std::optional<int64_t> high = parts.size() == 2 ? parse_int(parts[1]) : low;
  if (parts.size() > 2 || !low || !high || *low < 1 || *high < *low || *high > proto::kMaxNodes) {
    problems.push_back(
        cat("--nnodes: expected N or MIN:MAX with 0 < MIN <= MAX, got '", text, "'"));
    return {1, 1};
  }
  return {static_cast<int>(*low), static_cast<int>(*high)};
}

ValidatedRun validate_run_flags(const RunOptions& options, const RunEnvironment& machine) {
  return check_flags(options, machine).run;
}

ValidatedRun validate_run_options(const RunOptions& options, const RunEnvironment& machine) {
  CheckedFlags checked = check_flags(options, machine);
  ValidatedRun& run = checked.run;
  run.config.host_name = machine.host_name;
  plan_rendezvous(options, checked.conf.is_host, machine, run.config.rendezvous, run.daemon,
                  run.problems);
  if (!options.command.empty()) build_command(options, machine, run.config, run.problems);
  if (run.problems.empty()) plan_binding(options, machine, run.config, run.problems);
  return std::move(run);
}

std::string random_run_id() {
  std::string id = proto::random_nonce(16);  // 32 hex digits, then a uuid's dashes
  for (size_t dash : {20, 16, 12, 8}) id.insert(dash, 1, '-');
  return id;
}

}  // namespace cohort
