// Reads the machine's topology through hwloc into the planner's MachineTopology: each PU's core,
// L3 group, NUMA node and package by their hwloc objects (OS indices as the kernel numbers CPUs,
// however non-linear), and each GPU's NUMA node by its PCI bus id (from NVML) matched to hwloc's
// PCI objects. hwloc itself honours HWLOC_XMLFILE and HWLOC_SYNTHETIC (another machine's
// description: the plan is then reported, not applied). Main thread, at start.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/topology/machine_topology.hpp"

namespace cohort {

/// The topology with the GPUs of `gpu_bus_ids` (by NVML index) placed; nullopt with `error` when
/// hwloc cannot load it.
std::optional<MachineTopology> load_machine_topology(const std::vector<std::string>& gpu_bus_ids,
                                                     std::string& error);

}  // namespace cohort
