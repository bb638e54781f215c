#include "launcher/topology/binding_plan.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>

#include "launcher/topology/hwloc_topology.hpp"
#include "tests/support/test_paths.hpp"

using namespace cohort;

namespace {

// tests/data/two_socket_eight_gpu.xml: 2 sockets x 2 NUMA nodes x 2 L3 groups x 4 cores x 2
// hardware threads. Core c (0-31) has CPUs c and c+32 (siblings numbered 32 apart); NUMA node n
// has cores 8n..8n+7, its L3 groups cores 8n..8n+3 and 8n+4..8n+7; sockets hold nodes 0-1 and
// 2-3. Two GPUs per NUMA node, NVML indices 2n and 2n+1.
const std::vector<std::string> kBusIds{"0000:07:00.0", "0000:0b:00.0", "0000:48:00.0",
                                       "0000:4c:00.0", "0000:88:00.0", "0000:8c:00.0",
                                       "0000:c8:00.0", "0000:cc:00.0"};

MachineTopology two_socket_machine() {
  std::string xml = std::string(test::kSourceDir) + "/tests/data/two_socket_eight_gpu.xml";
  ::setenv("HWLOC_XMLFILE", xml.c_str(), 1);
  std::string error;
  std::optional<MachineTopology> topology = load_machine_topology(kBusIds, error);
  ::unsetenv("HWLOC_XMLFILE");
  INFO(error);
  REQUIRE(topology);
  return *topology;
}

struct Row {
  int gpu;
  std::string cpus;
  std::string numa_nodes;
};

void check_plan(const BindingPlan& plan, const std::vector<Row>& table) {
  INFO(plan.problem);
  REQUIRE(plan.ranks.size() == table.size());
  for (size_t rank = 0; rank < table.size(); ++rank) {
    INFO("local rank " << rank);
    CHECK(plan.ranks[rank].gpu == table[rank].gpu);
    CHECK(cpu_list_text(plan.ranks[rank].cpu.cpus) == table[rank].cpus);
    CHECK(cpu_list_text(plan.ranks[rank].cpu.numa_nodes) == table[rank].numa_nodes);
  }
}

BindingPlan numa_plan(NumaBinding mode, int nproc, std::optional<std::string> visible = {}) {
  return plan_bindings(two_socket_machine(), {mode, CpuBind::kNone, nproc, visible});
}

}  // namespace

TEST_CASE("hwloc reads the XML topology: CPUs by OS index, GPUs by PCI bus id", "[unit][binding]") {
  MachineTopology topology = two_socket_machine();
  CHECK_FALSE(topology.this_machine);
  REQUIRE(topology.pus.size() == 64);
  CHECK(topology.pus[0].os_index == 0);
  CHECK(topology.pus[1].os_index == 32);  // hwloc's order: a core's threads together
  CHECK(topology.pus[0].core == topology.pus[1].core);
  REQUIRE(topology.gpus.size() == 8);
  std::vector<int> nodes;
  for (const auto& gpu : topology.gpus) nodes.push_back(gpu.numa_node);
  CHECK(nodes == std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3});
}

TEST_CASE("flag --numa-binding node on 2 sockets and 8 GPUs: the GPU's NUMA node",
          "[unit][binding]") {
  check_plan(numa_plan(NumaBinding::kNode, 8), {{0, "0-7,32-39", "0"},
                                                {1, "0-7,32-39", "0"},
                                                {2, "8-15,40-47", "1"},
                                                {3, "8-15,40-47", "1"},
                                                {4, "16-23,48-55", "2"},
                                                {5, "16-23,48-55", "2"},
                                                {6, "24-31,56-63", "3"},
                                                {7, "24-31,56-63", "3"}});
}

TEST_CASE("flag --numa-binding socket on 2 sockets and 8 GPUs: the GPU's socket",
          "[unit][binding]") {
  check_plan(numa_plan(NumaBinding::kSocket, 8), {{0, "0-15,32-47", "0-1"},
                                                  {1, "0-15,32-47", "0-1"},
                                                  {2, "0-15,32-47", "0-1"},
                                                  {3, "0-15,32-47", "0-1"},
                                                  {4, "16-31,48-63", "2-3"},
                                                  {5, "16-31,48-63", "2-3"},
                                                  {6, "16-31,48-63", "2-3"},
                                                  {7, "16-31,48-63", "2-3"}});
}

// Each NUMA node's 8 cores in two disjoint halves, one per GPU: exclusive's even shares, and
// here also core-complex's L3 groups (4 cores each).
const std::vector<Row> kHalvesOfEachNode{{0, "0-3,32-35", "0"},   {1, "4-7,36-39", "0"},
                                         {2, "8-11,40-43", "1"},  {3, "12-15,44-47", "1"},
                                         {4, "16-19,48-51", "2"}, {5, "20-23,52-55", "2"},
                                         {6, "24-27,56-59", "3"}, {7, "28-31,60-63", "3"}};

TEST_CASE("flag --numa-binding exclusive on 2 sockets and 8 GPUs: disjoint halves of each node",
          "[unit][binding]") {
  check_plan(numa_plan(NumaBinding::kExclusive, 8), kHalvesOfEachNode);
}

TEST_CASE("flag --numa-binding core-complex on 2 sockets and 8 GPUs: an L3 group each",
          "[unit][binding]") {
  check_plan(numa_plan(NumaBinding::kCoreComplex, 8), kHalvesOfEachNode);
}

TEST_CASE("a remapped CUDA_VISIBLE_DEVICES binds local rank n near its n-th entry",
          "[unit][binding]") {
  // GPU 3 is alone on node 1 among the visible ones, GPU 1 alone on node 0.
  check_plan(numa_plan(NumaBinding::kExclusive, 2, "3,1"),
             {{3, "8-15,40-47", "1"}, {1, "0-7,32-39", "0"}});
  check_plan(numa_plan(NumaBinding::kCoreComplex, 2, "3,1"),
             {{3, "8-11,40-43", "1"}, {1, "0-3,32-35", "0"}});
  check_plan(numa_plan(NumaBinding::kNode, 2, "6,0"),
             {{6, "24-31,56-63", "3"}, {0, "0-7,32-39", "0"}});
}

TEST_CASE("flag --cpu-bind cores and numa on 2 sockets: even shares, round-robin nodes",
          "[unit][binding]") {
  MachineTopology topology = two_socket_machine();
  check_plan(plan_bindings(topology, {NumaBinding::kNone, CpuBind::kCores, 3, {}}),
             {{-1, "0-10,32-42", "0-1"}, {-1, "11-21,43-53", "1-2"}, {-1, "22-31,54-63", "2-3"}});
  check_plan(plan_bindings(topology, {NumaBinding::kNone, CpuBind::kNuma, 5, {}}),
             {{-1, "0-7,32-39", "0"},
              {-1, "8-15,40-47", "1"},
              {-1, "16-23,48-55", "2"},
              {-1, "24-31,56-63", "3"},
              {-1, "0-7,32-39", "0"}});
  BindingPlan plan = plan_bindings(topology, {NumaBinding::kNone, CpuBind::kCores, 2, {}});
  CHECK(plan.ranks[0].cpu.cores == 16);
  CHECK_FALSE(plan.ranks[0].cpu.apply);  // another machine's topology
}

TEST_CASE("plans that cannot be made name their flags", "[unit][binding]") {
  MachineTopology topology = two_socket_machine();
  BindingPlan cores = plan_bindings(topology, {NumaBinding::kNone, CpuBind::kCores, 33, {}});
  CHECK(cores.ranks.empty());
  CHECK(cores.problem.find("--cpu-bind cores: 33 workers (--nproc-per-node) but 32 cores") == 0);
  BindingPlan gpus = numa_plan(NumaBinding::kNode, 3, "5,2");
  CHECK(gpus.problem.find("--numa-binding node: 3 workers") == 0);
  BindingPlan uuid = numa_plan(NumaBinding::kNode, 1, "GPU-6a2f");
  CHECK(uuid.problem.find("--numa-binding: CUDA_VISIBLE_DEVICES names GPUs by UUID") == 0);
  CHECK(parse_numa_binding("rack") == std::nullopt);
  CHECK(parse_cpu_bind("sockets") == std::nullopt);
}
