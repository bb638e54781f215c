// `cohort run` binding workers (--cpu-bind, --numa-binding, --report-bindings) with real
// processes: each worker reads its own CPU affinity from /proc/self/status. The 2-socket 8-GPU
// machine is tests/data/two_socket_eight_gpu.xml (HWLOC_XMLFILE) with the NVML test double
// (COHORT_NVML_LIBRARY): planned and reported, not applied, since it is not this machine.
#include <fstream>
#include <sstream>

#include "integration_support.hpp"
#include "process/cpu_binding.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {

// Each worker writes its Cpus_allowed_list, COHORT_CPU_LIST, COHORT_NUMA_NODE and
// OMP_NUM_THREADS to binding.<local rank> in the working directory.
const std::vector<std::string> kBindingWorker{
    "--no-python", "/bin/sh", "-c",
    "{ sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status; "
    "echo \"$COHORT_CPU_LIST\"; echo \"$COHORT_NUMA_NODE\"; echo \"$OMP_NUM_THREADS\"; } "
    "> binding.$LOCAL_RANK"};

struct WorkerView {
  std::string allowed, cpu_list, numa_node, omp_threads;
};

WorkerView worker_view(const Scratch& scratch, int local_rank) {
  std::ifstream in(scratch.file("binding." + std::to_string(local_rank)));
  WorkerView view;
  std::getline(in, view.allowed);
  std::getline(in, view.cpu_list);
  std::getline(in, view.numa_node);
  std::getline(in, view.omp_threads);
  return view;
}

std::vector<std::string> with_worker(std::vector<std::string> args) {
  args.insert(args.end(), kBindingWorker.begin(), kBindingWorker.end());
  return args;
}

std::vector<std::string> report_lines(const std::string& err) {
  std::vector<std::string> lines;
  for (const auto& line : split_lines(err)) {
    if (line.rfind("cohort: rank ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

std::string own_cpus_allowed() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      std::istringstream fields(line.substr(18));
      std::string list;
      fields >> list;
      return list;
    }
  }
  return {};
}

}  // namespace

TEST_CASE("flag --cpu-bind cores gives 2 workers disjoint single CPUs, as they see them",
          "[integration][binding]") {
  auto allowed = parse_cpu_list(own_cpus_allowed());
  REQUIRE(allowed);
  require_prerequisite(allowed->size() >= 2, "2 CPUs to split");
  Scratch scratch;
  RunResult result = scratch.run(
      with_worker({"--nproc-per-node", "2", "--cpu-bind", "cores", "--report-bindings"}));
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  WorkerView first = worker_view(scratch, 0), second = worker_view(scratch, 1);
  auto first_cpus = parse_cpu_list(first.allowed), second_cpus = parse_cpu_list(second.allowed);
  REQUIRE(first_cpus);
  REQUIRE(second_cpus);
  size_t share = allowed->size() / 2;
  CHECK(first_cpus->size() == share);
  CHECK(second_cpus->size() == share);
  CHECK(first_cpus->back() < second_cpus->front());  // disjoint
  CHECK(first.cpu_list == first.allowed);
  CHECK(second.cpu_list == second.allowed);
  CHECK(first.numa_node == "0");
  CHECK(first.omp_threads == std::to_string(share));
  CHECK_FALSE(contains(result.err, "setting OMP_NUM_THREADS=1"));
  std::vector<std::string> lines = report_lines(result.err);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "cohort: rank 0 (local rank 0): gpu -, numa node 0, cpus " + first.allowed);
  CHECK(lines[1] == "cohort: rank 1 (local rank 1): gpu -, numa node 0, cpus " + second.allowed);
}

TEST_CASE("without a binding workers keep the agent's CPUs and OMP_NUM_THREADS=1",
          "[integration][binding]") {
  Scratch scratch;
  RunResult result = scratch.run(
      with_worker({"--nproc-per-node", "2", "--cpu-bind", "none", "--report-bindings"}));
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  WorkerView view = worker_view(scratch, 1);
  CHECK(view.allowed == own_cpus_allowed());
  CHECK(view.cpu_list.empty());
  CHECK(view.omp_threads == "1");
  CHECK(report_lines(result.err) ==
        std::vector<std::string>{"cohort: rank 0 (local rank 0): gpu -, not bound",
                                 "cohort: rank 1 (local rank 1): gpu -, not bound"});
}

TEST_CASE("flag --numa-binding node on the 2-socket 8-GPU topology reports the planned bindings",
          "[integration][binding]") {
  Scratch scratch;
  std::map<std::string, std::string> machine{
      {"HWLOC_XMLFILE", std::string(kSourceDir) + "/tests/data/two_socket_eight_gpu.xml"},
      {"COHORT_NVML_LIBRARY", kFakeNvmlLibrary},
      {"COHORT_FAKE_NVML_BUS_IDS",
       "0000:07:00.0,0000:0b:00.0,0000:48:00.0,0000:4c:00.0,0000:88:00.0,0000:8c:00.0,"
       "0000:c8:00.0,0000:cc:00.0"},
      {"CUDA_VISIBLE_DEVICES", "7,6,5,4,3,2,1,0"}};
  RunResult result = scratch.run(
      with_worker({"--nproc-per-node", "8", "--numa-binding", "node", "--report-bindings"}),
      machine);
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  std::vector<std::string> lines = report_lines(result.err);
  REQUIRE(lines.size() == 8);
  const char* planned = " (planned, not applied: the topology is not this machine's)";
  CHECK(lines[0] ==
        std::string("cohort: rank 0 (local rank 0): gpu 7, numa node 3, cpus 24-31,56-63") +
            planned);
  CHECK(lines[5] ==
        std::string("cohort: rank 5 (local rank 5): gpu 2, numa node 1, cpus 8-15,40-47") +
            planned);
  WorkerView view = worker_view(scratch, 5);
  CHECK(view.cpu_list == "8-15,40-47");
  CHECK(view.numa_node == "1");
  CHECK(view.omp_threads == "8");
  CHECK(view.allowed == own_cpus_allowed());  // not applied: these CPUs are not this machine's
}

TEST_CASE("binding flags: bad values and impossible plans stop the run, naming the flags",
          "[integration][binding]") {
  Scratch scratch;
  RunResult bad_mode = scratch.run(with_worker({"--cpu-bind", "sockets"}));
  CHECK(bad_mode.status.shell_code() == 2);
  CHECK(contains(bad_mode.err, "--cpu-bind: expected none, cores or numa, got 'sockets'"));
  RunResult no_gpu = scratch.run(with_worker({"--numa-binding", "node"}),
                                 {{"COHORT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
  CHECK(no_gpu.status.shell_code() == 2);
  CHECK(contains(no_gpu.err, "--numa-binding node: no GPU found"));
  RunResult too_many = scratch.run(with_worker({"--nproc-per-node", "64", "--cpu-bind", "cores"}));
  CHECK(too_many.status.shell_code() == 2);
  CHECK(contains(too_many.err, "--cpu-bind cores: 64 workers (--nproc-per-node) but"));
  CHECK_FALSE(std::ifstream(scratch.file("binding.0")).good());  // no worker started
}
