// `cohort run`'s command line: every torchrun flag in both spellings (--nproc-per-node and
// --nproc_per_node), PET_* environment defaults (CLI11 reads them while parsing), and cohort's
// own additions. Parsing fills the raw RunOptions; run_validation turns them into an AgentConfig
// or a list of problems. Main thread, at start.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/log.hpp"

namespace cohort {

struct RunOptions {
  std::string nnodes = "1:1";
  std::string nproc_per_node = "1";
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string rdzv_id = "none";
  std::string rdzv_conf;
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
  int node_rank = 0;
  bool node_rank_hint = false;  ///< use node_rank as a hint under c10d too (Slurm's SLURM_NODEID)
  std::string master_addr;
  int master_port = 0;
  std::string local_addr;
  std::optional<double> shutdown_timeout;  ///< seconds; unset: TORCH_ELASTIC_SHUTDOWN_TIMEOUT or 30
  double hang_timeout = 0;                 ///< seconds without a sign of life; 0: off
  std::optional<double> hang_first_timeout;  ///< before the first one; unset: 10 x hang_timeout
  int max_same_failures = 3;                 ///< the same failure this often in a row ends the run
  std::string no_restart_exit_codes;         ///< "1,3": failures with these codes are final
  double min_uptime = 0;                     ///< seconds; a failure sooner is a start-up failure
  std::string signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  std::string event_log_handler = "null";
  std::string worker_store = "daemon";
  std::string store_ports;
  std::string store_quota = "1G";  ///< per-round worker store quota of a daemon this agent hosts
  std::string token_file;          ///< the run's shared secret (else $COHORT_TOKEN)
  bool insecure = false;           ///< host a rendezvous beyond loopback without a token
  bool raw_output = false;
  bool under_launch = false;   ///< set by cohort launch on every host
  bool in_slurm_step = false;  ///< Slurm signals the workers itself: USR1/USR2 are absorbed
  int verbose = 0;
  bool quiet = false;
  std::vector<std::string> command;  ///< the training script (or module/binary) and its args
};

/// Adds every `cohort run` flag to `app`, bound to `options`.
void add_run_flags(CLI::App& app, RunOptions& options);

/// Takes the training script and its arguments from what CLI11 left unparsed. Returns an error
/// message (an unknown flag, no script) or an empty string.
std::string take_command(const std::vector<std::string>& remaining, RunOptions& options);

/// cohort's own log level: -q, -v, -vv, else LOGLEVEL, else warnings.
log::Level log_level_for(const RunOptions& options);

}  // namespace cohort
