#include "launcher/run_options.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <random>

#include "common/host_port.hpp"
#include "common/signal_names.hpp"
#include "common/text.hpp"
#include "launcher/gpu_count.hpp"
#include "launcher/rdzv_conf.hpp"
#include "launcher/slurm_env.hpp"
#include "proto/control_messages.hpp"

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

struct Problems {
  std::vector<std::string> list;
  template <typename... Parts>
  void add(const Parts&... parts) {
    list.push_back(cat(parts...));
  }
};

int resolve_nproc(const std::string& text, Problems& problems) {
  auto gpus = [] {
    return visible_gpu_count(nvml_device_count().value_or(0), std::getenv("CUDA_VISIBLE_DEVICES"));
  };
  int cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  if (text == "cpu") return cpus;
  if (text == "auto") {
    int count = gpus();
    return count > 0 ? count : cpus;
  }
  if (text == "gpu") {
    int count = gpus();
    if (count == 0) {
      problems.add(
          "--nproc-per-node gpu: no GPU found (NVML reports none, or "
          "CUDA_VISIBLE_DEVICES hides them all)");
    }
    return count;
  }
  auto number = parse_int(text);
  if (!number || *number < 1 || *number > 4096) {
    problems.add("--nproc-per-node: expected a positive number, 'cpu', 'gpu' or 'auto', got '",
                 text, "'");
    return 1;
  }
  return static_cast<int>(*number);
}

std::pair<int, int> parse_nnodes(const std::string& text, Problems& problems) {
  auto parts = split(text, ':');
  std::optional<int64_t> low = parse_int(parts[0]);
  std::optional<int64_t> high = parts.size() == 2 ? parse_int(parts[1]) : low;
  if (parts.size() > 2 || !low || !high || *low < 1 || *high < *low || *high > proto::kMaxNodes) {
    problems.add("--nnodes: expected N or MIN:MAX with 0 < MIN <= MAX, got '", text, "'");
    return {1, 1};
  }
  return {static_cast<int>(*low), static_cast<int>(*high)};
}

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

std::pair<uint16_t, uint16_t> store_port_range(const std::string& text, Problems& problems) {
  if (text.empty()) return {0, 0};
  auto range = parse_port_range(text);
  if (!range) {
    problems.add("--store-ports: expected PORT or FIRST-LAST within 1-65535, got '", text, "'");
    return {0, 0};
  }
  return *range;
}

// Decides where the agent finds the rendezvous daemon and whether it hosts it (torchrun's rules:
// --standalone and single-node runs keep a private one; c10d uses --rdzv-endpoint; static uses
// --master-addr:--master-port with node rank 0 as the host).
void plan_rendezvous(const RunOptions& options, int min_nodes, int max_nodes, ValidatedRun& run,
                     Problems& problems) {
  RendezvousSettings& settings = run.config.rendezvous;
  DaemonPlan& daemon = run.daemon;
  std::vector<std::string> conf_problems;
  RdzvConf conf = parse_rdzv_conf(options.rdzv_conf, conf_problems);
  for (auto& problem : conf_problems) problems.list.push_back(problem);
  settings.config = {min_nodes,
                     max_nodes,
                     options.max_restarts,
                     conf.last_call_timeout.count(),
                     conf.join_timeout.count(),
                     conf.heartbeat_timeout.count()};
  settings.heartbeat_interval = conf.heartbeat_interval;
  settings.address = options.local_addr.empty() ? host_name() : options.local_addr;
  settings.rank0_store = options.worker_store == "rank0";
  auto [store_min, store_max] = store_port_range(options.store_ports, problems);
  daemon.options.store_port_min = store_min;
  daemon.options.store_port_max = store_max;

  auto embed_private = [&] {
    daemon.embed = DaemonPlan::Embed::Yes;
    daemon.options.address = options.local_addr.empty() ? "127.0.0.1" : options.local_addr;
    daemon.options.port = 0;  // the launcher connects the agent to whatever port it got
    settings.host = daemon.options.address;
    settings.address = daemon.options.address;  // one node: rank 0's MASTER_ADDR is this host
  };
  if (options.standalone) {
    if (max_nodes > 1)
      problems.add("--standalone: runs on one node; drop --nnodes ", options.nnodes);
    return embed_private();
  }
  if (options.rdzv_backend == "static" && options.rdzv_endpoint.empty()) {
    if (max_nodes == 1) return embed_private();
    if (options.node_rank >= max_nodes) {
      problems.add("--node-rank ", options.node_rank, " must be below --nnodes ", max_nodes);
    }
    settings.host = options.master_addr.empty() ? "127.0.0.1" : options.master_addr;
    settings.port = static_cast<uint16_t>(options.master_port == 0 ? 29500 : options.master_port);
    settings.rank_hint = options.node_rank;
    settings.config.min_nodes = max_nodes;
    daemon.embed = options.node_rank == 0 ? DaemonPlan::Embed::Yes : DaemonPlan::Embed::No;
    daemon.options.address = settings.host;
    daemon.options.port = settings.port;
    return;
  }
  if (options.rdzv_endpoint.empty()) {
    if (max_nodes == 1) return embed_private();
    problems.add("--rdzv-endpoint: required with --rdzv-backend ", options.rdzv_backend,
                 " and more than one node (host[:port] of the rendezvous daemon)");
    return;
  }
  auto endpoint = parse_host_port(options.rdzv_endpoint, 29400);
  if (!endpoint) {
    problems.add("--rdzv-endpoint: expected host, host:port or [v6]:port, got '",
                 options.rdzv_endpoint, "'");
    return;
  }
  settings.host = endpoint->host;
  settings.port = endpoint->port;
  if (options.rdzv_backend == "static" || options.node_rank_hint) {
    settings.rank_hint = options.node_rank;
  }
  if (endpoint->port == 0 && max_nodes > 1) {
    problems.add("--rdzv-endpoint: port 0 (any free port) only works for one node");
  }
  bool local = conf.is_host.value_or(is_local_host(endpoint->host));
  if (!local) return;
  daemon.embed = conf.is_host ? DaemonPlan::Embed::Yes : DaemonPlan::Embed::IfFree;
  // A name (node1, Slurm's first host) is served on every address: here it may resolve to
  // 127.0.1.1 (Debian's /etc/hosts) while the other nodes reach this machine by its network
  // address. An address literal is bound as given.
  daemon.options.address = endpoint->host == "localhost"   ? "127.0.0.1"
                           : is_ip_address(endpoint->host) ? endpoint->host
                                                           : "0.0.0.0";
  daemon.options.port = endpoint->port;
}

std::string python_executable() {
  if (const char* python = std::getenv("PYTHON_EXEC"); python != nullptr && *python) return python;
  const char* path = std::getenv("PATH");
  std::string found = find_executable("python3", path ? path : "");
  return found.empty() ? "python3" : found;
}

void build_command(const RunOptions& options, AgentConfig& config, Problems& problems) {
  const std::string& target = options.command.front();
  std::vector<std::string> rest(options.command.begin() + 1, options.command.end());
  config.entrypoint_name = target;
  if (options.no_python) {
    const char* path = std::getenv("PATH");
    config.executable = find_executable(target, path ? path : "");
    if (!config.executable.empty() && ::access(config.executable.c_str(), X_OK) != 0) {
      config.executable.clear();  // a path (it has a '/') to nothing executable
    }
    if (config.executable.empty()) {
      problems.add("--no-python: '", target, "' is not an executable file",
                   target.find('/') == std::string::npos ? " in PATH" : "");
    }
    config.args = rest;
    return;
  }
  config.executable = python_executable();
  config.args = {"-u"};
  if (options.module) config.args.push_back("-m");
  config.args.push_back(target);
  config.args.insert(config.args.end(), rest.begin(), rest.end());
}

void parse_outputs(const RunOptions& options, AgentConfig& config, Problems& problems) {
  auto redirects = StdSpec::parse(options.redirects);
  if (!redirects)
    problems.add("--redirects: expected 0-3 or RANK:VALUE,..., got '", options.redirects, "'");
  auto tee = StdSpec::parse(options.tee);
  if (!tee) problems.add("--tee: expected 0-3 or RANK:VALUE,..., got '", options.tee, "'");
  if (redirects) config.output.redirects = *redirects;
  if (tee) config.output.tee = *tee;
  if (!options.local_ranks_filter.empty()) {
    for (const auto& item : split(options.local_ranks_filter, ',')) {
      auto rank = parse_int(trim(item));
      if (!rank || *rank < 0 || *rank > INT_MAX) {
        problems.add("--local-ranks-filter: expected local ranks like 0,2, got '",
                     options.local_ranks_filter, "'");
        break;
      }
      config.output.console_ranks.insert(static_cast<int>(*rank));
    }
  }
  config.output.raw = options.raw_output;
  if (const char* prefix = std::getenv("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE")) {
    config.output.prefix_template = prefix;
  }
}

void parse_signals(const RunOptions& options, AgentConfig& config, Problems& problems) {
  for (const auto& item : split(options.signals_to_handle, ',')) {
    auto signal = parse_signal(trim(item));
    if (!signal || *signal == SIGKILL || *signal == SIGSTOP || *signal == SIGCHLD) {
      problems.add("--signals-to-handle: '", std::string(trim(item)),
                   "' is not a signal cohort can handle");
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

std::chrono::milliseconds shutdown_timeout(const RunOptions& options, Problems& problems) {
  constexpr std::chrono::milliseconds kDefault(30000);
  if (!(options.shutdown_timeout < 0)) {  // given (NaN too)
    if (auto timeout = seconds_to_ms(options.shutdown_timeout)) return *timeout;
    problems.add("--shutdown-timeout: expected seconds between 0 and a year, got ",
                 options.shutdown_timeout);
    return kDefault;
  }
  const char* env = std::getenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
  if (env == nullptr) return kDefault;
  if (auto timeout = parse_seconds(env)) return *timeout;
  problems.add("TORCH_ELASTIC_SHUTDOWN_TIMEOUT: not a number of seconds up to a year: '", env, "'");
  return kDefault;
}

void check_rendezvous_flags(const RunOptions& options, Problems& problems) {
  if (options.rdzv_backend != "static" && options.rdzv_backend != "c10d") {
    if (options.rdzv_backend.rfind("etcd", 0) == 0) {
      problems.add("--rdzv-backend ", options.rdzv_backend,
                   ": etcd is not supported; cohort's own daemon replaces it (use c10d)");
    } else {
      problems.add("--rdzv-backend: expected 'c10d' or 'static', got '", options.rdzv_backend, "'");
    }
  }
  if (options.start_method != "spawn" && options.start_method != "fork" &&
      options.start_method != "forkserver") {
    problems.add("--start-method: expected spawn, fork or forkserver, got '", options.start_method,
                 "'");
  }
  if (options.monitor_interval <= 0) problems.add("--monitor-interval: must be > 0");
  if (options.max_restarts < 0) problems.add("--max-restarts: must be >= 0");
  if (options.node_rank < 0) problems.add("--node-rank: must be >= 0");
  if (options.master_port < 0 || options.master_port > 65535) {
    problems.add("--master-port: expected 0-65535, got ", options.master_port);
  }
  if (options.module && options.no_python)
    problems.add("--module: cannot be combined with --no-python");
  if (options.worker_store != "daemon" && options.worker_store != "rank0") {
    problems.add("--worker-store: expected 'daemon' or 'rank0', got '", options.worker_store, "'");
  }
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
              "Seconds between the stop signal and SIGKILL (default 30)");
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

ValidatedRun validate_run_options(const RunOptions& options) {
  ValidatedRun result;
  AgentConfig& config = result.config;
  Problems problems;
  auto [min_nodes, max_nodes] = parse_nnodes(options.nnodes, problems);
  check_rendezvous_flags(options, problems);
  config.nproc = resolve_nproc(options.nproc_per_node, problems);
  config.env.local_world_size = config.nproc;
  config.env.role = options.role;
  config.env.max_restarts = options.max_restarts;
  config.env.run_id = options.standalone ? random_run_id() : options.rdzv_id;
  config.shutdown_timeout = shutdown_timeout(options, problems);
  config.log_dir = options.log_dir;
  parse_outputs(options, config, problems);
  parse_signals(options, config, problems);
  config.host_name = host_name();
  config.under_launch = options.under_launch;
  plan_rendezvous(options, min_nodes, max_nodes, result, problems);
  if (!options.command.empty()) build_command(options, config, problems);
  result.problems = std::move(problems.list);
  return result;
}

std::string random_run_id() {
  std::random_device device;
  std::mt19937_64 engine(device());
  const char* hex = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) id += '-';
    id += hex[engine() % 16];
  }
  return id;
}

log::Level log_level_for(const RunOptions& options) {
  if (options.quiet) return log::Level::Error;
  if (options.verbose > 1) return log::Level::Debug;
  if (options.verbose == 1) return log::Level::Info;
  return log::level_from_env(log::Level::Warn);
}

}  // namespace cohort

namespace cohort {

std::vector<std::string> apply_slurm_defaults(const CLI::App& app, RunOptions& options,
                                              const std::map<std::string, std::string>& env,
                                              std::vector<std::string>& problems) {
  std::optional<SlurmDefaults> slurm = slurm_defaults(env);
  if (!slurm) return {};
  problems.insert(problems.end(), slurm->problems.begin(), slurm->problems.end());
  std::vector<std::string> taken;
  auto given = [&](const char* flag) { return app.get_option(flag)->count() > 0; };
  auto take = [&](const char* flag, const std::optional<SlurmValue>& value, std::string& field) {
    if (!value || given(flag)) return false;
    field = value->value;
    taken.push_back(cat(flag, " ", value->value, " from ", value->source));
    return true;
  };
  take("--nnodes", slurm->nnodes, options.nnodes);
  take("--nproc-per-node", slurm->nproc_per_node, options.nproc_per_node);
  bool endpoint_taken = false;
  if (!options.standalone && !given("--rdzv-id"))
    take("--rdzv-id", slurm->rdzv_id, options.rdzv_id);
  if (!options.standalone && !given("--master-addr")) {
    endpoint_taken = take("--rdzv-endpoint", slurm->rdzv_endpoint, options.rdzv_endpoint);
  }
  if (endpoint_taken && !given("--rdzv-backend")) {
    options.rdzv_backend = "c10d";
    taken.push_back("--rdzv-backend c10d (a Slurm step)");
  }
  std::string node_rank;
  if (take("--node-rank", slurm->node_rank, node_rank)) {
    options.node_rank = static_cast<int>(parse_int(node_rank).value_or(0));
    options.node_rank_hint = true;  // c10d honours it too: Slurm's node order
  }
  options.in_slurm_step = true;
  taken.push_back("SIGUSR1/SIGUSR2 not forwarded: Slurm signals every process of the step itself");
  return taken;
}

}  // namespace cohort
