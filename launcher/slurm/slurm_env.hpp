// Inside a Slurm step (srun), what `cohort run` can take from SLURM_* instead of flags: the node
// count, a run id, the rendezvous host (first host of the step's node list) and a per-step port,
// the node-rank hint, and the worker count. Each value says where it came from, for --verbose.
// Pure; main thread at start.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cohort {

struct SlurmValue {
  std::string value;
  std::string source;    ///< "SLURM_JOB_NUM_NODES=4", ...
  std::string variable;  ///< the variables it came from: "SLURM_JOB_NUM_NODES", ...
};

struct SlurmDefaults {
  std::optional<SlurmValue> nnodes;
  std::optional<SlurmValue> rdzv_id;
  std::optional<SlurmValue> rdzv_endpoint;
  /// The second and third hosts of the node list at the same port, for an elastic run of three
  /// nodes or more (apply_slurm_defaults decides).
  std::optional<SlurmValue> rdzv_fallback;
  std::optional<SlurmValue> node_rank;
  std::optional<SlurmValue> nproc_per_node;
  std::vector<std::string> problems;  ///< e.g. a node list that does not parse
};

/// nullopt outside a Slurm step (no SLURM_JOB_ID and SLURM_STEP_ID). `port`: the rendezvous
/// port to put with the node list's hosts (an explicit --master-port); 0: the derived one.
std::optional<SlurmDefaults> slurm_defaults(const std::map<std::string, std::string>& env,
                                            int port = 0);

/// The first and last rendezvous ports a Slurm step may get: below Linux's ephemeral ports
/// (32768 on), where the kernel picks the ports of outgoing connections.
constexpr int kSlurmFirstPort = 29400;
constexpr int kSlurmLastPort = 32399;

/// The rendezvous port a step uses on its first node: the same on every node of the step, from
/// kSlurmFirstPort to kSlurmLastPort. The job id is hashed and the step id added, so the steps of
/// one job (up to 3000 at once) never share a port, and two jobs sharing a node do so by chance
/// only (1 in 3000 for a pair, where ids 1000 apart always did).
int slurm_rendezvous_port(uint64_t job_id, uint64_t step_id);

}  // namespace cohort
