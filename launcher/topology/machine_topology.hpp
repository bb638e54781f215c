// What binding needs to know of a machine: every logical CPU (PU) with the core, L3 group, NUMA
// node and socket it belongs to, and every GPU (by NVML index) with its PCI bus id and the NUMA
// node it hangs off. Filled from hwloc by hwloc_topology.*, written by hand in tests; the
// binding planner reads it. Plain data; main thread, at start.
#pragma once

#include <string>
#include <vector>

namespace cohort {

struct TopologyPu {
  int os_index = 0;   ///< the CPU number the kernel uses (sched_setaffinity, /proc)
  int core = 0;       ///< the core it is a hardware thread of (unique in the machine)
  int l3_group = -1;  ///< the L3 cache it shares (unique in the machine); -1: none known
  int numa_node = 0;  ///< OS index of its NUMA node
  int socket = 0;     ///< its package (unique in the machine)
};

struct TopologyGpu {
  std::string bus_id;  ///< "0000:07:00.0"
  int numa_node = -1;  ///< OS index of the NUMA node it is attached to; -1: not found
};

struct MachineTopology {
  std::vector<TopologyPu> pus;    ///< in hwloc's logical order (cores' threads together)
  std::vector<TopologyGpu> gpus;  ///< by NVML index
  bool this_machine = true;       ///< false: loaded from HWLOC_XMLFILE / HWLOC_SYNTHETIC
};

}  // namespace cohort
