// Where one worker may run and place its memory: a CPU set (OS indices) and the NUMA nodes its
// memory policy prefers, planned by the launcher before the round and applied by the spawner in
// the child between fork and exec (sched_setaffinity, set_mempolicy) with no allocation there.
// Plain data and pure helpers; PreparedBinding is built before fork, applied after; any thread.
#pragma once

#include <sched.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

struct CpuBinding {
  std::vector<int> cpus;        ///< OS indices of the logical CPUs, sorted; empty: not bound
  std::vector<int> numa_nodes;  ///< NUMA nodes of those CPUs, sorted (memory policy, reports)
  int cores = 0;                ///< physical cores among `cpus` (OMP_NUM_THREADS)
  bool memory_policy = true;    ///< prefer `numa_nodes` for memory (false: one-node machines)
  bool apply = true;  ///< false: reported and exported only (a topology of another machine)
  bool bound() const { return !cpus.empty(); }
};

/// One local rank's binding and the GPU it was planned for (NVML index; -1: none).
struct WorkerBinding {
  int gpu = -1;
  CpuBinding cpu;
};

/// "0-3,8-11" for {0,1,2,3,8,9,10,11} (sorted input); "" for none.
std::string cpu_list_text(const std::vector<int>& sorted_ids);

/// The inverse of cpu_list_text ("0-3,8" -> {0,1,2,3,8}, sorted, no duplicates); nullopt for
/// text that is not such a list, or that names more than 65536 ids in all (repeats counted).
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

/// What the child needs to apply a CpuBinding, computed before fork.
struct PreparedBinding {
  bool set_affinity = false;
  cpu_set_t cpus{};
  int mempolicy_mode = -1;                   ///< -1: leave the memory policy alone
  std::array<unsigned long, 16> nodemask{};  ///< up to 1024 NUMA nodes
  unsigned long max_node = 0;
};

PreparedBinding prepare_binding(const CpuBinding& binding);

/// Applies a prepared binding to the calling process; async-signal-safe (between fork and
/// exec). Returns 0, or the errno of the affinity call (a memory policy the kernel refuses is
/// left as it was).
int apply_prepared_binding(const PreparedBinding& prepared);

}  // namespace cohort
