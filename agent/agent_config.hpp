// What one node's agent is told to do: the workers it runs and their environment, where the
// rendezvous is and how this node joins it, and the settings of the agent's parts (hangs, crash
// loops, output, health, binding). Filled in from `cohort run`'s flags by its validation
// (launcher/options/run_validation) on the main thread, then handed to the Agent, which owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/crash_loop.hpp"
#include "agent/health_settings.hpp"
#include "agent/output_config.hpp"
#include "agent/progress_deadlines.hpp"
#include "agent/worker_binding.hpp"
#include "agent/worker_env.hpp"
#include "proto/control_messages.hpp"

namespace cohort {

/// Where the rendezvous moves when its daemon is lost (--rdzv-fallback), and whether this agent
/// hosts a daemon there when it gets there (the endpoint names this machine).
struct FallbackEndpoint {
  std::string host;
  uint16_t port = 29400;
  bool local = false;
  std::string bind_address;  ///< for a local one: what its daemon listens on
};

struct RendezvousSettings {
  std::string host = "127.0.0.1";
  uint16_t port = 29400;
  std::vector<FallbackEndpoint> fallbacks;  ///< in order; empty: the daemon never moves
  /// Where the agent connects first: 0 --rdzv-endpoint, n the n-th fallback (the run had moved
  /// there before this agent started).
  size_t first_endpoint = 0;
  std::string address;           ///< what this node advertises (--local-addr or host name)
  std::optional<int> rank_hint;  ///< --node-rank (static) or SLURM_NODEID
  proto::WireRunConfig config;
  std::chrono::milliseconds heartbeat_interval{1000};
  bool rank0_store = false;  ///< --worker-store=rank0: worker rank 0 binds MASTER_PORT
  std::string token;         ///< the run's shared secret; empty: none
  /// Added to the rendezvous's refusal of the token when the endpoint is one cohort chose (in a
  /// Slurm step, a port derived from the job and step ids, which another job or step on that
  /// node may hold): the likely cause and the way out. Empty: the user gave the endpoint.
  std::string refused_token_hint;
};

struct AgentConfig {
  std::string executable;         ///< resolved path of what each worker runs
  bool python_worker = false;     ///< `executable` is the Python interpreter (not --no-python)
  std::vector<std::string> args;  ///< its arguments; "${local_rank}" is substituted
  std::string entrypoint_name;    ///< the script or module, for the failure summary
  int nproc = 1;
  WorkerEnvSettings env;
  std::chrono::milliseconds shutdown_timeout{30000};
  HangSettings hang;               ///< --hang-timeout, --hang-first-timeout; off by default
  int straggler_factor_pct = 150;  ///< --straggler-factor, in percent, sent with progress reports
  CrashLoopSettings crash_loop;    ///< --max-same-failures, --no-restart-exit-codes, --min-uptime
  std::vector<int> extra_signals;  ///< forwarded without stopping (SIGUSR1, ...)
  /// Caught but not forwarded: inside a Slurm step, Slurm signals every process of the step
  /// itself (SIGUSR1/SIGUSR2 of --signal), so forwarding would deliver them twice.
  std::vector<int> absorbed_signals;
  std::string log_dir;  ///< empty: temporary; "/dev/null": no files
  OutputConfig output;
  std::string host_name;
  RendezvousSettings rendezvous;
  /// Runs before cohort exits, with a continuation (an embedded daemon lets the other nodes
  /// hear the end of the run first). Empty: exit at once.
  std::function<void(std::function<void()>)> before_exit;
  /// Runs when the agent continues after Ctrl-Z, before its first heartbeat (an embedded daemon
  /// was stopped with it, and forgives its nodes the silence). Empty: nothing to do.
  std::function<void()> after_pause;
  /// Hosts a daemon at a fallback endpoint that names this machine, when the agent moves there,
  /// unless one listens there already (cohort run sets it); true when it did. Empty: host nothing.
  std::function<bool(const FallbackEndpoint&)> host_fallback;
  /// This agent's process hosts the daemon at its first endpoint (cohort run sets it): its hello
  /// says so, and the daemon tells each round's members whether their host is one of them.
  bool hosts_rendezvous = false;
  /// Started by cohort launch: stdin is the ssh connection, and its end (EOF) stops the workers
  /// like SIGHUP; what every host would repeat (progress, warnings, the summary of another
  /// host's failure) is left to the launcher's console at info level.
  bool under_launch = false;
  /// Under cohort launch, on a lost host started again: how long ago the launch started the job,
  /// added to the agent's age in its hello, so that should the run end before it joins it hears
  /// how (rdzv::EndedRuns) instead of opening a fresh run under the same id.
  std::chrono::milliseconds launch_age{0};
  bool console_events = false;   ///< --event-log-handler console: each event's line on stderr
  std::string event_log;         ///< --event-log: append each event's line to this file
  HealthSettings health;         ///< --health-check: before every round; off by default
  GpuHealthSettings gpu_health;  ///< the built-in GPU checks; on when the node has GPUs
  std::vector<WorkerBinding>
      bindings;                  ///< per local rank (--numa-binding, --cpu-bind); empty: none
  bool report_bindings = false;  ///< --report-bindings: a line per rank each round
};

}  // namespace cohort
