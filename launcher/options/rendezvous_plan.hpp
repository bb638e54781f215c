// Where `cohort run`'s agent finds the rendezvous daemon and whether it hosts it, by torchrun's
// rules: --standalone (one node, whatever --nnodes' maximum) and single-node runs keep a private
// one; c10d uses --rdzv-endpoint (hosted
// here when it names this machine); static uses --master-addr:--master-port with node rank 0 as
// the host. Pure (the machine is read through RunEnvironment); main thread, at start.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/agent_config.hpp"
#include "launcher/options/fallback_list.hpp"
#include "launcher/options/rdzv_conf.hpp"
#include "launcher/options/run_environment.hpp"
#include "launcher/options/run_options.hpp"
#include "rendezvous/daemon_options.hpp"

namespace cohort {

/// Whether this agent also hosts the rendezvous daemon, and where.
struct DaemonPlan {
  enum class Embed { No, Yes, IfFree };  ///< IfFree: host it unless something listens there
  Embed embed = Embed::No;
  DaemonOptions options;
  bool insecure = false;  ///< --insecure: may listen beyond loopback without a token
};

/// What holds whatever the endpoint: the node range, the restart budget, --rdzv-conf's timeouts,
/// --worker-store, and --store-ports and --store-quota for a daemon this agent may host.
/// Problems name their flag.
void plan_rendezvous_settings(const RunOptions& options, int min_nodes, int max_nodes,
                              const RdzvConf& conf, RendezvousSettings& settings,
                              DaemonPlan& daemon, std::vector<std::string>& problems);

/// Then where the daemon is: fills the host, port, advertised address and rank hint of
/// `settings` (whose node range plan_rendezvous_settings set) and the daemon's embedding.
/// `is_host` is --rdzv-conf's is_host (forces or forbids hosting).
void plan_rendezvous(const RunOptions& options, std::optional<bool> is_host,
                     const RunEnvironment& machine, RendezvousSettings& settings,
                     DaemonPlan& daemon, std::vector<std::string>& problems);

}  // namespace cohort
