// `cohort run`'s command line: every torchrun flag and cohort's own, each in both spellings
// (--nproc-per-node and --nproc_per_node) with a PET_* environment default (CLI11 reads them while
// parsing); internal flags (cohort launch's) are accepted but hidden from --help. Parsing fills
// the raw RunOptions; run_validation turns them into an AgentConfig or a list of problems. Main
// thread, at start.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/run_id.hpp"
#include "launcher/options/cli_fwd.hpp"

namespace cohort {

struct RunOptions {
  std::string nnodes = "1:1";
  std::string nproc_per_node = "1";
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string rdzv_id = kDefaultRunId;
  std::string rdzv_conf;
  std::string rdzv_fallback;  ///< --rdzv-fallback: host[:port],... where the rendezvous moves
  bool standalone = false;
  int max_restarts = 0;
  double monitor_interval = 0.1;
  std::string start_method = "spawn";
  std::string role = "default";
  bool module = false;
  bool no_python = false;
  bool run_path = false;
  std::string log_dir;
  std::string redirects = "0";
  std::string tee = "0";
  std::string local_ranks_filter;
  std::string duplicate_stdout_filters;  ///< torchrun's comma list (",," escapes a comma)
  std::string duplicate_stderr_filters;
  std::string log_line_prefix_template;  ///< empty: TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE
  int node_rank = 0;
  bool node_rank_hint = false;  ///< use node_rank as a hint under c10d too (Slurm's SLURM_NODEID)
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool master_port_given = false;  ///< typed (or PET_MASTER_PORT): one node's store is there
  std::string local_addr;
  std::optional<double> shutdown_timeout;  ///< seconds; unset: TORCH_ELASTIC_SHUTDOWN_TIMEOUT or 30
  double hang_timeout = 0;                 ///< seconds without a sign of life; 0: off
  std::optional<double> hang_first_timeout;  ///< before the first one; unset: 10 x hang_timeout
  double hang_dump_timeout = 10;      ///< seconds a hang waits for the NCCL flight recorder's dumps
  double straggler_factor = 1.5;      ///< a rank this many times slower than the median straggles
  int max_same_failures = 3;          ///< the same failure this often in a row ends the run
  std::string no_restart_exit_codes;  ///< "1,3": failures with these codes are final
  double min_uptime = 0;              ///< seconds; a failure sooner is a start-up failure
  std::string signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  std::string event_log_handler = "null";
  std::string event_log;              ///< append this node's events (and its daemon's) to this file
  std::string health_check;           ///< a command that must exit 0 before the node joins a round
  double health_check_timeout = 60;   ///< seconds; the check is killed after this
  double health_check_interval = 10;  ///< seconds between checks while the node is unhealthy
  double gpu_reclaim_timeout = 30;    ///< seconds a GPU may stay held by the previous round
  int host_failure_limit = 2;         ///< root-cause failures before a host is excluded; 0 never
  double host_exclusion_cooldown = 60;  ///< seconds, the first exclusion's; doubles each time
  int http_port = -1;                   ///< the hosted daemon's HTTP port on 127.0.0.1; -1: none
  std::string logs_specs;           ///< a Python plugin's name: accepted, ignored with a warning
  std::string numa_binding;         ///< node, socket, exclusive, core-complex; empty: none
  std::string cpu_bind = "none";    ///< none, cores, numa (CPU-only runs)
  bool report_bindings = false;     ///< a line per rank on stderr each round
  bool virtual_local_rank = false;  ///< every worker LOCAL_RANK=0 and only its own GPU
  std::string worker_store = "daemon";
  std::string store_ports;
  std::string store_quota = "1G";   ///< per-round worker store quota of a daemon this agent hosts
  std::string store_budget = "4G";  ///< what all that daemon's stores may hold together
  std::string token_file;           ///< the run's shared secret (else $COHORT_TOKEN)
  bool insecure = false;            ///< host a rendezvous beyond loopback without a token
  bool raw_output = false;
  bool under_launch = false;  ///< set by cohort launch on every host
  /// Set by cohort launch: how long to wait for the token line (0: kTokenLineTimeout).
  int64_t token_wait_ms = 0;
  std::string own_version;  ///< this binary's --version text (set by main, not a flag)
  /// Set by cohort launch on a lost host it starts again: how long ago it started the job.
  int64_t launched_ms_ago = 0;
  bool in_slurm_step = false;  ///< Slurm signals the workers itself: USR1/USR2 are absorbed
  int verbose = 0;
  bool quiet = false;
  std::vector<std::string> command;  ///< the training script (or module/binary) and its args
};

/// Adds every `cohort run` flag to `app`, bound to `options`.
void add_run_flags(CLI::App& app, RunOptions& options);

/// Makes every flag of `command` that takes a value refuse an empty one ("--token-file=", an
/// unset variable in a script), which CLI11 would take as the default. For the operator's
/// commands (status, stop, doctor, cohortd); cohort run takes "" where torchrun's argparse does.
void refuse_empty_values(CLI::App& command);

/// Takes the training script and its arguments from what CLI11 left unparsed, less the one "--"
/// that torchrun drops (before the script, else right after it). Returns an error message (an
/// unknown flag, with the closest of `flags` when one is close; no script) or an empty string;
/// `command` names the subcommand in it ("run", "launch").
std::string take_command(const std::vector<std::string>& remaining, RunOptions& options,
                         const std::string& command = "run",
                         const std::vector<std::string>& flags = {});

/// "--nproc-per-node" -> "PET_NPROC_PER_NODE": the environment default of a flag.
std::string pet_name(const std::string& dashed);

/// torchrun's environment switches that stand for a flag left unset (on the command line and in
/// PET_*): TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 is --worker-store rank0. Returns what it set.
std::vector<std::string> apply_torch_env_defaults(const CLI::App& app, RunOptions& options,
                                                  const std::map<std::string, std::string>& env);

/// The first "--name" in `text` (a problem, a parse error): the flag it is about; "" if none.
std::string flag_named_in(const std::string& text);

/// " (from PET_NNODES in the environment)" when the value of `app`'s flag named in `text` (the
/// first "--name" in it: a problem, a parse error) came from its PET_ variable and not from the
/// command line, so that a user who never typed the flag sees where it came from; else "".
std::string env_origin(const CLI::App& app, const std::string& text,
                       const std::map<std::string, std::string>& env);

/// cohort's own log level: -q, -v, -vv, else LOGLEVEL, else warnings.
log::Level log_level_for(const RunOptions& options);

}  // namespace cohort
