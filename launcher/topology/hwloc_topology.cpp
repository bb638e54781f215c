#include "launcher/topology/hwloc_topology.hpp"

#include <hwloc.h>

#include <cstdio>

namespace cohort {
namespace {

// The topology, destroyed with it.
class HwlocTopology {
 public:
  HwlocTopology() { hwloc_topology_init(&topology_); }
  ~HwlocTopology() { hwloc_topology_destroy(topology_); }
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;
  hwloc_topology_t get() const { return topology_; }

 private:
  hwloc_topology_t topology_ = nullptr;
};

int ancestor_index(hwloc_topology_t topology, hwloc_obj_t pu, hwloc_obj_type_t type, int none) {
  hwloc_obj_t ancestor = hwloc_get_ancestor_obj_by_type(topology, type, pu);
  return ancestor != nullptr ? static_cast<int>(ancestor->logical_index) : none;
}

TopologyPu describe_pu(hwloc_topology_t topology, hwloc_obj_t pu) {
  TopologyPu described;
  described.os_index = static_cast<int>(pu->os_index);
  // A machine without Core objects: each PU is a core of its own (ids past every core's).
  described.core = ancestor_index(topology, pu, HWLOC_OBJ_CORE, 1 << 20 | pu->logical_index);
  described.l3_group = ancestor_index(topology, pu, HWLOC_OBJ_L3CACHE, -1);
  described.socket = ancestor_index(topology, pu, HWLOC_OBJ_PACKAGE, 0);
  int node = hwloc_bitmap_first(pu->nodeset);
  described.numa_node = node < 0 ? 0 : node;
  return described;
}

// The NUMA node a PCI device hangs off: the first of its nearest non-I/O ancestor's; -1 when
// the bus id is not in the topology.
int gpu_numa_node(hwloc_topology_t topology, const std::string& bus_id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) return -1;
  hwloc_obj_t pci = hwloc_get_pcidev_by_busid(topology, domain, bus, device, function);
  if (pci == nullptr) return -1;
  hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topology, pci);
  return local != nullptr ? hwloc_bitmap_first(local->nodeset) : -1;
}

}  // namespace

std::optional<MachineTopology> load_machine_topology(const std::vector<std::string>& gpu_bus_ids,
                                                     std::string& error) {
  HwlocTopology holder;
  hwloc_topology_t topology = holder.get();
  if (!gpu_bus_ids.empty())
    hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topology) != 0) {
    error = "hwloc cannot load the machine's topology";
    return std::nullopt;
  }
  MachineTopology machine;
  machine.this_machine = hwloc_topology_is_thissystem(topology) != 0;
  int pus = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PU);
  for (int i = 0; i < pus; ++i) {
    machine.pus.push_back(describe_pu(
        topology, hwloc_get_obj_by_type(topology, HWLOC_OBJ_PU, static_cast<unsigned>(i))));
  }
  for (const auto& bus_id : gpu_bus_ids)
    machine.gpus.push_back({bus_id, gpu_numa_node(topology, bus_id)});
  return machine;
}

}  // namespace cohort
