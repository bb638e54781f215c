#include "launcher/options/rendezvous_plan.hpp"

#include <algorithm>
#include <tuple>

#include "common/host_port.hpp"
#include "common/text.hpp"
#include "launcher/options/byte_size.hpp"

namespace cohort {
namespace {

std::pair<uint16_t, uint16_t> store_port_range(const std::string& text,
                                               std::vector<std::string>& problems) {
  if (text.empty()) return {0, 0};
  auto range = parse_port_range(text);
  if (!range) {
    problems.push_back(
        cat("--store-ports: expected PORT or FIRST-LAST within 1-65535, got '", text, "'"));
    return {0, 0};
  }
  return *range;
}

// A daemon of this agent's own on 127.0.0.1 (or --local-addr), any free port.
void embed_private(const RunOptions& options, RendezvousSettings& settings, DaemonPlan& daemon) {
  daemon.embed = DaemonPlan::Embed::Yes;
  daemon.options.address = options.local_addr.empty() ? "127.0.0.1" : options.local_addr;
  daemon.options.port = 0;  // the launcher connects the agent to whatever port it got
  settings.host = daemon.options.address;
  settings.address = daemon.options.address;  // one node: rank 0's MASTER_ADDR is this host
}

// Static rendezvous without an endpoint: node rank 0 hosts it at --master-addr:--master-port.
void plan_static(const RunOptions& options, RendezvousSettings& settings, DaemonPlan& daemon,
                 std::vector<std::string>& problems) {
  int max_nodes = settings.config.max_nodes;
  if (options.node_rank >= max_nodes) {
    problems.push_back(
        cat("--node-rank ", options.node_rank, " must be below --nnodes ", max_nodes));
  }
  settings.host = options.master_addr.empty() ? "127.0.0.1" : options.master_addr;
  settings.port = static_cast<uint16_t>(options.master_port == 0 ? 29500 : options.master_port);
  settings.rank_hint = options.node_rank;
  settings.config.min_nodes = max_nodes;
  daemon.embed = options.node_rank == 0 ? DaemonPlan::Embed::Yes : DaemonPlan::Embed::No;
  daemon.options.address = settings.host;
  daemon.options.port = settings.port;
}

// A name (node1, Slurm's first host) is served on every address: here it may resolve to
// 127.0.1.1 (Debian's /etc/hosts) while the other nodes reach this machine by its network
// address. An address literal is bound as given.
std::string bind_address_for(const std::string& host) {
  return host == "localhost" ? "127.0.0.1" : is_ip_address(host) ? host : "0.0.0.0";
}

// --rdzv-endpoint given: the agent connects there, and hosts the daemon when it names this
// machine.
void plan_endpoint(const RunOptions& options, std::optional<bool> is_host,
                   const RunEnvironment& machine, RendezvousSettings& settings, DaemonPlan& daemon,
                   std::vector<std::string>& problems) {
  auto endpoint = parse_host_port(options.rdzv_endpoint, 29400);
  if (!endpoint) {
    problems.push_back(cat("--rdzv-endpoint: expected host, host:port or [v6]:port, got '",
                           options.rdzv_endpoint, "'"));
    return;
  }
  settings.host = endpoint->host;
  settings.port = endpoint->port;
  if (options.rdzv_backend == "static" || options.node_rank_hint) {
    settings.rank_hint = options.node_rank;
  }
  if (endpoint->port == 0 && settings.config.max_nodes > 1) {
    problems.push_back("--rdzv-endpoint: port 0 (any free port) only works for one node");
  }
  bool local = is_host.value_or(machine.is_local_host(endpoint->host));
  if (!local) return;
  daemon.embed = is_host ? DaemonPlan::Embed::Yes : DaemonPlan::Embed::IfFree;
  daemon.options.address = bind_address_for(endpoint->host);
  daemon.options.port = endpoint->port;
}

// --rdzv-fallback: each endpoint in order, with the port of --rdzv-endpoint unless given; one
// that names this machine is hosted here once the agent moves there.
void plan_fallbacks(const RunOptions& options, const RunEnvironment& machine,
                    RendezvousSettings& settings, std::vector<std::string>& problems) {
  if (options.rdzv_fallback.empty()) return;
  if (options.standalone || options.rdzv_endpoint.empty()) {
    problems.push_back(
        "--rdzv-fallback: needs --rdzv-endpoint (the daemon it stands in for) and more than one "
        "node");
    return;
  }
  std::string problem;
  auto endpoints = parse_fallback_list(options.rdzv_fallback, settings.port, problem);
  if (!endpoints) return problems.push_back(problem);
  std::vector<std::string> seen = {host_port_text(settings.host, settings.port)};
  for (const HostPort& endpoint : *endpoints) {
    std::string key = host_port_text(endpoint.host, endpoint.port);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      problems.push_back(cat("--rdzv-fallback: ", key, " is named twice (with --rdzv-endpoint)"));
      return;
    }
    seen.push_back(key);
    bool local = machine.is_local_host(endpoint.host);
    settings.fallbacks.push_back({endpoint.host, endpoint.port, local,
                                  local ? bind_address_for(endpoint.host) : std::string()});
  }
  // As every node must give it; the daemon refuses a node whose list differs.
  settings.config.fallbacks = join(std::vector<std::string>(seen.begin() + 1, seen.end()), ",");
}

}  // namespace

void plan_rendezvous_settings(const RunOptions& options, int min_nodes, int max_nodes,
                              const RdzvConf& conf, RendezvousSettings& settings,
                              DaemonPlan& daemon, std::vector<std::string>& problems) {
  daemon.options.agent_hosted = true;  // whatever daemon `cohort run` hosts lives in its agent
  settings.config = {min_nodes,
                     max_nodes,
                     options.max_restarts,
                     conf.last_call_timeout.count(),
                     conf.join_timeout.count(),
                     conf.heartbeat_timeout.count()};
  if (options.host_failure_limit < 0 || options.host_failure_limit > 1000000) {
    problems.push_back(cat("--host-failure-limit: expected 0 (never exclude) to 1000000, got ",
                           options.host_failure_limit));
  }
  settings.config.host_failure_limit = options.host_failure_limit;
  auto cooldown = seconds_to_ms(options.host_exclusion_cooldown);
  if (!cooldown || cooldown->count() < 1) {
    problems.push_back(
        cat("--host-exclusion-cooldown: expected positive seconds up to a year, got ",
            options.host_exclusion_cooldown));
  } else {
    settings.config.host_cooldown_ms = cooldown->count();
  }
  settings.heartbeat_interval = conf.heartbeat_interval;
  settings.rank0_store = options.worker_store == "rank0";
  auto [store_min, store_max] = store_port_range(options.store_ports, problems);
  daemon.options.store_port_min = store_min;
  daemon.options.store_port_max = store_max;
  for (auto [flag, text, bytes] :
       {std::tuple{"--store-quota", &options.store_quota, &daemon.options.store_quota_bytes},
        std::tuple{"--store-budget", &options.store_budget, &daemon.options.store_budget_bytes}}) {
    if (auto size = parse_byte_size(*text)) {
      *bytes = *size;
    } else {
      problems.push_back(byte_size_problem(flag, *text));
    }
  }
}

void plan_rendezvous(const RunOptions& options, std::optional<bool> is_host,
                     const RunEnvironment& machine, RendezvousSettings& settings,
                     DaemonPlan& daemon, std::vector<std::string>& problems) {
  int max_nodes = settings.config.max_nodes;
  settings.address = options.local_addr.empty() ? machine.host_name : options.local_addr;
  if (options.standalone || options.rdzv_endpoint.empty()) {
    plan_fallbacks(options, machine, settings, problems);  // refused: nothing to stand in for
  }
  if (options.standalone) {
    if (settings.config.min_nodes > 1)
      problems.push_back(cat("--standalone: runs on one node; drop --nnodes ", options.nnodes));
    // --nnodes 1:4: one node, as torchrun's private rendezvous admits no other.
    settings.config.min_nodes = settings.config.max_nodes = 1;
    return embed_private(options, settings, daemon);
  }
  if (options.rdzv_backend == "static" && options.rdzv_endpoint.empty()) {
    if (max_nodes > 1) return plan_static(options, settings, daemon, problems);
    if (options.node_rank > 0 && !options.node_rank_hint)  // torchrun waits for a node rank 0
      problems.push_back(cat("--node-rank ", options.node_rank, " must be below --nnodes 1"));
    embed_private(options, settings, daemon);
    // As torchrun's static rendezvous: one node's workers find their store at --master-port,
    // when one is given (a script may connect there itself: init_method="tcp://HOST:PORT").
    bool store_at_master_port = options.master_port_given && options.master_port > 0 &&
                                options.store_ports.empty() && options.worker_store != "rank0";
    if (store_at_master_port) {
      daemon.options.store_port_min = daemon.options.store_port_max =
          static_cast<uint16_t>(options.master_port);
    }
    return;
  }
  if (options.rdzv_endpoint.empty()) {
    if (max_nodes == 1) return embed_private(options, settings, daemon);
    problems.push_back(cat("--rdzv-endpoint: required with --rdzv-backend ", options.rdzv_backend,
                           " and more than one node (host[:port] of the rendezvous daemon)"));
    return;
  }
  plan_endpoint(options, is_host, machine, settings, daemon, problems);
  plan_fallbacks(options, machine, settings, problems);
}

}  // namespace cohort
