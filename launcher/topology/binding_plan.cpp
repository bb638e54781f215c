#include "launcher/topology/binding_plan.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "common/text.hpp"

namespace cohort {
namespace {

using CpuGroups = std::vector<std::vector<int>>;  // each a sorted list of CPU OS indices

// The `index`-th of `parts` even shares of `count` items, as [first, last): the lowest
// indices get one more when it does not divide (torch's exclusive mode).
std::pair<size_t, size_t> even_share(size_t count, size_t parts, size_t index) {
  size_t base = count / parts;
  size_t extra = count % parts;
  size_t first = index * base + std::min(index, extra);
  return {first, first + base + (index < extra ? 1 : 0)};
}

// The CPUs (of one NUMA node, or all with -1) grouped by `key_of`.
CpuGroups group_cpus(const MachineTopology& topology, int (*key_of)(const TopologyPu&),
                     int numa_node) {
  std::map<int, std::vector<int>> groups;
  for (const auto& pu : topology.pus) {
    if (numa_node < 0 || pu.numa_node == numa_node) groups[key_of(pu)].push_back(pu.os_index);
  }
  CpuGroups result;
  for (auto& [key, cpus] : groups) {
    std::sort(cpus.begin(), cpus.end());
    result.push_back(std::move(cpus));
  }
  return result;  // in hwloc's topology order (the keys are logical indices), not by CPU number
}

// Physical cores (of one NUMA node, or all with -1), each its hardware threads.
CpuGroups cores_of(const MachineTopology& topology, int numa_node) {
  return group_cpus(
      topology, [](const TopologyPu& pu) { return pu.core; }, numa_node);
}

std::vector<int> flatten(CpuGroups::const_iterator first, CpuGroups::const_iterator last) {
  std::vector<int> cpus;
  for (auto group = first; group != last; ++group)
    cpus.insert(cpus.end(), group->begin(), group->end());
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

std::set<int> numa_nodes_of(const MachineTopology& topology) {
  std::set<int> nodes;
  for (const auto& pu : topology.pus) nodes.insert(pu.numa_node);
  return nodes;
}

CpuBinding binding_for(const MachineTopology& topology, std::vector<int> cpus) {
  CpuBinding binding;
  std::set<int> wanted(cpus.begin(), cpus.end()), nodes, cores;
  for (const auto& pu : topology.pus) {
    if (!wanted.count(pu.os_index)) continue;
    nodes.insert(pu.numa_node);
    cores.insert(pu.core);
  }
  binding.cpus = std::move(cpus);
  binding.numa_nodes.assign(nodes.begin(), nodes.end());
  binding.cores = static_cast<int>(cores.size());
  binding.memory_policy = numa_nodes_of(topology).size() > 1;
  binding.apply = topology.this_machine;
  return binding;
}

std::vector<int> cpus_where(const MachineTopology& topology, auto predicate) {
  std::vector<int> cpus;
  for (const auto& pu : topology.pus) {
    if (predicate(pu)) cpus.push_back(pu.os_index);
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

// The GPUs the local ranks see, as NVML indices in CUDA's order: CUDA_VISIBLE_DEVICES' entries
// up to the first invalid one (as CUDA reads it), else all.
std::vector<int> visible_gpus(const MachineTopology& topology, const BindingRequest& request,
                              std::string& problem) {
  int physical = static_cast<int>(topology.gpus.size());
  std::vector<int> visible;
  if (!request.cuda_visible_devices) {
    for (int gpu = 0; gpu < physical; ++gpu) visible.push_back(gpu);
    return visible;
  }
  for (const auto& raw : split(*request.cuda_visible_devices, ',')) {
    std::string entry(trim(raw));
    if (entry.rfind("GPU-", 0) == 0 || entry.rfind("MIG-", 0) == 0) {
      problem = cat("--numa-binding: CUDA_VISIBLE_DEVICES names GPUs by UUID ('", entry,
                    "'); cohort places GPUs by index only");
      return {};
    }
    auto index = parse_int(entry);
    if (!index || *index < 0 || *index >= physical) break;
    visible.push_back(static_cast<int>(*index));
  }
  return visible;
}

// A GPU whose NUMA node is unknown (a one-node machine often says -1) counts as the first.
int numa_node_of_gpu(const MachineTopology& topology, int gpu) {
  int node = topology.gpus[static_cast<size_t>(gpu)].numa_node;
  std::set<int> nodes = numa_nodes_of(topology);
  if (node < 0 || !nodes.count(node)) return nodes.empty() ? 0 : *nodes.begin();
  return node;
}

struct GpuPlace {
  int node = 0;
  int position = 0;  ///< among the visible GPUs on the same NUMA node
  int peers = 1;     ///< visible GPUs on that node
};

GpuPlace place_of(const MachineTopology& topology, const std::vector<int>& visible,
                  size_t local_rank) {
  GpuPlace place;
  place.node = numa_node_of_gpu(topology, visible[local_rank]);
  place.peers = 0;
  for (size_t i = 0; i < visible.size(); ++i) {
    if (numa_node_of_gpu(topology, visible[i]) != place.node) continue;
    if (i < local_rank) ++place.position;
    ++place.peers;
  }
  return place;
}

const char* numa_mode_name(NumaBinding mode) {
  switch (mode) {
    case NumaBinding::kNode:
      return "node";
    case NumaBinding::kSocket:
      return "socket";
    case NumaBinding::kExclusive:
      return "exclusive";
    case NumaBinding::kCoreComplex:
      return "core-complex";
    default:
      return "";
  }
}

std::vector<int> numa_cpus(const MachineTopology& topology, NumaBinding mode, const GpuPlace& place,
                           std::string& problem) {
  auto on_node = [&](const TopologyPu& pu) { return pu.numa_node == place.node; };
  if (mode == NumaBinding::kNode) return cpus_where(topology, on_node);
  if (mode == NumaBinding::kSocket) {
    auto first = std::find_if(topology.pus.begin(), topology.pus.end(), on_node);
    if (first == topology.pus.end()) return {};
    int socket = first->socket;
    return cpus_where(topology, [&](const TopologyPu& pu) { return pu.socket == socket; });
  }
  if (mode == NumaBinding::kExclusive) {
    CpuGroups cores = cores_of(topology, place.node);
    if (cores.size() < static_cast<size_t>(place.peers)) {
      problem = cat("--numa-binding exclusive: NUMA node ", place.node, " has ", cores.size(),
                    " cores for ", place.peers, " GPUs");
      return {};
    }
    auto [first, last] = even_share(cores.size(), static_cast<size_t>(place.peers),
                                    static_cast<size_t>(place.position));
    return flatten(cores.begin() + static_cast<long>(first),
                   cores.begin() + static_cast<long>(last));
  }
  // core-complex: the L3 groups of the node, bigger first, then in topology order; one per GPU,
  // wrapping around when the node has more GPUs than L3 groups (as torch does).
  CpuGroups groups = group_cpus(
      topology, [](const TopologyPu& pu) { return pu.l3_group; }, place.node);
  if (groups.empty()) return {};
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.size() > b.size(); });
  return groups[static_cast<size_t>(place.position) % groups.size()];
}

BindingPlan plan_numa_binding(const MachineTopology& topology, const BindingRequest& request) {
  BindingPlan plan;
  std::vector<int> visible = visible_gpus(topology, request, plan.problem);
  if (!plan.problem.empty()) return plan;
  if (visible.size() < static_cast<size_t>(request.nproc)) {
    plan.problem = cat("--numa-binding ", numa_mode_name(request.numa), ": ", request.nproc,
                       " workers (--nproc-per-node) but ", visible.size(),
                       " GPUs visible; local rank n is bound near GPU n");
    return plan;
  }
  for (size_t rank = 0; rank < static_cast<size_t>(request.nproc); ++rank) {
    GpuPlace place = place_of(topology, visible, rank);
    std::vector<int> cpus = numa_cpus(topology, request.numa, place, plan.problem);
    if (!plan.problem.empty()) return {{}, plan.problem};
    if (cpus.empty()) {
      return {{},
              cat("--numa-binding ", numa_mode_name(request.numa), ": no CPU found near GPU ",
                  visible[rank])};
    }
    plan.ranks.push_back({visible[rank], binding_for(topology, std::move(cpus))});
  }
  return plan;
}

BindingPlan plan_cpu_bind(const MachineTopology& topology, const BindingRequest& request) {
  BindingPlan plan;
  size_t nproc = static_cast<size_t>(request.nproc);
  if (request.cpu == CpuBind::kCores) {
    CpuGroups cores = cores_of(topology, -1);
    if (cores.size() < nproc) {
      plan.problem = cat("--cpu-bind cores: ", nproc, " workers (--nproc-per-node) but ",
                         cores.size(), " cores; each worker needs a core of its own");
      return plan;
    }
    for (size_t rank = 0; rank < nproc; ++rank) {
      auto [first, last] = even_share(cores.size(), nproc, rank);
      plan.ranks.push_back(
          {-1, binding_for(topology, flatten(cores.begin() + static_cast<long>(first),
                                             cores.begin() + static_cast<long>(last)))});
    }
    return plan;
  }
  std::set<int> node_set = numa_nodes_of(topology);
  std::vector<int> nodes(node_set.begin(), node_set.end());
  for (size_t rank = 0; rank < nproc; ++rank) {
    int node = nodes[rank % nodes.size()];
    plan.ranks.push_back({-1, binding_for(topology, cpus_where(topology, [&](const TopologyPu& pu) {
                                            return pu.numa_node == node;
                                          }))});
  }
  return plan;
}

}  // namespace

std::optional<NumaBinding> parse_numa_binding(const std::string& text) {
  if (text.empty()) return NumaBinding::kNone;
  for (NumaBinding mode : {NumaBinding::kNode, NumaBinding::kSocket, NumaBinding::kExclusive,
                           NumaBinding::kCoreComplex}) {
    if (text == numa_mode_name(mode)) return mode;
  }
  return std::nullopt;
}

std::optional<CpuBind> parse_cpu_bind(const std::string& text) {
  if (text == "none") return CpuBind::kNone;
  if (text == "cores") return CpuBind::kCores;
  if (text == "numa") return CpuBind::kNuma;
  return std::nullopt;
}

BindingPlan plan_bindings(const MachineTopology& topology, const BindingRequest& request) {
  if (topology.pus.empty() || request.nproc < 1) return {{}, "binding: the topology has no CPUs"};
  if (request.numa != NumaBinding::kNone) return plan_numa_binding(topology, request);
  if (request.cpu != CpuBind::kNone) return plan_cpu_bind(topology, request);
  return {};
}

}  // namespace cohort
