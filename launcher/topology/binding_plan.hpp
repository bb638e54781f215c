// The binding planner: from a MachineTopology, the binding flags and the local ranks (with
// CUDA_VISIBLE_DEVICES saying which GPU each uses), each local rank's CPU set and memory NUMA
// nodes. --numa-binding follows torchrun 2.9 (torch/numa/binding.py); --cpu-bind is for CPU-only
// runs (cores: DeepSpeed's --bind_cores_to_rank). Pure; main thread, at start.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/topology/machine_topology.hpp"
#include "process/cpu_binding.hpp"

namespace cohort {

enum class NumaBinding { kNone, kNode, kSocket, kExclusive, kCoreComplex };
enum class CpuBind { kNone, kCores, kNuma };

/// "node" -> kNode, ..., "" -> kNone; nullopt for anything else.
std::optional<NumaBinding> parse_numa_binding(const std::string& text);
/// "none", "cores", "numa"; nullopt for anything else.
std::optional<CpuBind> parse_cpu_bind(const std::string& text);

struct BindingRequest {
  NumaBinding numa = NumaBinding::kNone;
  CpuBind cpu = CpuBind::kNone;
  int nproc = 1;
  std::optional<std::string> cuda_visible_devices;  ///< local rank n uses its n-th entry
};

struct BindingPlan {
  std::vector<WorkerBinding> ranks;  ///< one per local rank; empty with a problem
  std::string problem;               ///< why no plan could be made, naming the flags
};

BindingPlan plan_bindings(const MachineTopology& topology, const BindingRequest& request);

}  // namespace cohort
