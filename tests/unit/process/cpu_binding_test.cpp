#include "process/cpu_binding.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

TEST_CASE("CPU lists print as ranges and parse back", "[unit][binding]") {
  CHECK(cpu_list_text({}) == "");
  CHECK(cpu_list_text({0, 1, 2, 3, 8, 9, 10, 11}) == "0-3,8-11");
  CHECK(cpu_list_text({5}) == "5");
  CHECK(cpu_list_text({0, 2, 3}) == "0,2-3");
  CHECK(parse_cpu_list("0-3,8") == std::vector<int>{0, 1, 2, 3, 8});
  CHECK(parse_cpu_list("3,1,1") == std::vector<int>{1, 3});
  CHECK(parse_cpu_list("") == std::vector<int>{});
  CHECK(parse_cpu_list("3-1") == std::nullopt);
  CHECK(parse_cpu_list("a") == std::nullopt);
  CHECK(parse_cpu_list("1,-2") == std::nullopt);
  CHECK(parse_cpu_list("2147483646-2147483647") == std::vector<int>{2147483646, 2147483647});
  CHECK(parse_cpu_list("0-65535")->size() == 65536);
  CHECK(parse_cpu_list("0-65536") == std::nullopt);
  // Found by the launcher_inputs fuzzer: ranges each within the old cap of one range that
  // together made one past it, so the list printed back (6-65942) was refused. The cap is now
  // on the whole list (repeats counted), and what it takes prints as a list it takes back.
  CHECK(parse_cpu_list("24760-65942,611-32447,6-32471") == std::nullopt);
  CHECK(parse_cpu_list("0-40000,100000-140000") == std::nullopt);  // 80002 in all
  auto joined = parse_cpu_list("0-30000,30001-65535");
  REQUIRE(joined);
  CHECK(cpu_list_text(*joined) == "0-65535");
  CHECK(parse_cpu_list(cpu_list_text(*joined)) == joined);
}

TEST_CASE("a prepared binding holds the CPUs and the preferred NUMA nodes", "[unit][binding]") {
  CpuBinding binding{{1, 3}, {1}, 2, true, true};
  PreparedBinding prepared = prepare_binding(binding);
  CHECK(prepared.set_affinity);
  CHECK(CPU_COUNT(&prepared.cpus) == 2);
  CHECK(CPU_ISSET(3, &prepared.cpus));
  CHECK(prepared.mempolicy_mode == 1);  // MPOL_PREFERRED
  CHECK(prepared.nodemask[0] == 2);
  binding.numa_nodes = {0, 1};
  CHECK(prepare_binding(binding).mempolicy_mode == 5);  // MPOL_PREFERRED_MANY
  binding.memory_policy = false;
  CHECK(prepare_binding(binding).mempolicy_mode == -1);
  binding.apply = false;
  CHECK_FALSE(prepare_binding(binding).set_affinity);
  CHECK_FALSE(prepare_binding(CpuBinding{}).set_affinity);
}
