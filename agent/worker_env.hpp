// The environment of every worker, exactly as torchrun sets it: ranks, world sizes, master
// address and port, restart count, run id, agent-store mode, error file, NCCL async error
// handling (under the name the workers' torch reads), the OMP_NUM_THREADS rule and
// --virtual-local-rank's one-GPU view, on top of the agent's own environment. Pure; any thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cohort {

/// What one round of the rendezvous decided for this node.
struct RoundInfo {
  int round = 0;             ///< TORCHELASTIC_RESTART_COUNT, the attempt number
  int group_rank = 0;        ///< this node's rank
  int group_world_size = 1;  ///< nodes in the round
  int base_rank = 0;         ///< global rank of this node's local rank 0
  int world_size = 1;        ///< workers in the round
  std::string master_addr;
  int master_port = 0;
  bool use_agent_store = false;
};

/// What stays the same for every worker of this agent.
struct WorkerEnvSettings {
  std::string role = "default";
  int local_world_size = 1;
  int max_restarts = 0;
  std::string run_id;
  std::string signals_to_handle;
  bool virtual_local_rank = false;  ///< LOCAL_RANK=0, CUDA_VISIBLE_DEVICES = this worker's GPU
  /// The workers' torch major version (2 for --no-python workers); none: unknown.
  std::optional<int> torch_major;
  /// Its minor version; none: unknown (and for --no-python workers).
  std::optional<int> torch_minor;
};

using EnvMap = std::map<std::string, std::string>;

/// --virtual-local-rank: the one device local rank `local_rank` may see, the entry at its index
/// in the agent's CUDA_VISIBLE_DEVICES (its index itself when that is unset); empty when the list
/// is too short.
std::string virtual_visible_device(const EnvMap& agent_env, int local_rank);

EnvMap parse_environ(char** environ_block);

/// NCCL's asynchronous error handling, on unless the user set it (either name, passed on as
/// it is): TORCH_NCCL_ASYNC_ERROR_HANDLING always; the older NCCL_ASYNC_ERROR_HANDLING, which
/// PyTorch 1.x reads and 2.x warns about, only when torch is older than 2 or unknown.
EnvMap async_error_handling(std::optional<int> torch_major, const EnvMap& agent_env);

/// The variables cohort sets for local rank `local_rank` (only those, not the inherited ones).
EnvMap worker_variables(const WorkerEnvSettings& settings, const RoundInfo& round, int local_rank,
                        const std::string& error_file, const EnvMap& agent_env);

/// With hang detection on, what helps explain a hang, unless the user set it: Python's
/// faulthandler (PYTHONFAULTHANDLER=1), and NCCL's flight recorder (trace buffer, dump on
/// timeout, dump files and the debug-info pipe under `attempt_dir`, when not empty). The dump
/// files' stem goes under the name the workers' torch reads without a deprecation warning:
/// TORCH_FR_DUMP_TEMP_FILE from PyTorch 2.9 on, TORCH_NCCL_DEBUG_INFO_TEMP_FILE before; both
/// when the minor version is unknown (--no-python); a name the user set is kept, alone.
EnvMap hang_variables(const std::string& attempt_dir, const EnvMap& agent_env,
                      const WorkerEnvSettings& settings);

/// PYTHONPATH with `python_dir` (where the cohort_heartbeat module is) added at its end, so
/// that the user's own modules win.
std::string python_path_with(const std::string& python_dir, const EnvMap& agent_env);

/// The pipe NCCL's flight recorder of global rank `rank` reads (TORCH_NCCL_DEBUG_INFO_PIPE_FILE
/// is a stem: PyTorch adds the rank and ".pipe"); empty when `vars` has no stem.
std::string nccl_dump_pipe(const EnvMap& vars, int rank);

/// Where NCCL's flight recorder of global rank `rank` writes the dump its pipe asks for: the
/// stem in TORCH_FR_DUMP_TEMP_FILE (newer PyTorch), else TORCH_NCCL_DEBUG_INFO_TEMP_FILE, else
/// PyTorch's default /tmp/nccl_trace_rank_, followed by the rank.
std::string nccl_dump_file(const EnvMap& vars, int rank);

/// agent_env overlaid with variables, as "NAME=value" entries.
std::vector<std::string> merge_env(const EnvMap& agent_env, const EnvMap& variables);

}  // namespace cohort
