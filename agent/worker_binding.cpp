#include "agent/worker_binding.hpp"

#include "common/text.hpp"

namespace cohort {

EnvMap binding_variables(const CpuBinding& binding, const EnvMap& agent_env) {
  if (!binding.bound()) return {};
  EnvMap vars{{"COHORT_CPU_LIST", cpu_list_text(binding.cpus)},
              {"COHORT_NUMA_NODE", cpu_list_text(binding.numa_nodes)}};
  if (agent_env.count("OMP_NUM_THREADS") == 0)
    vars["OMP_NUM_THREADS"] = std::to_string(binding.cores > 0 ? binding.cores : 1);
  return vars;
}

std::string binding_report_line(int rank, int local_rank, const WorkerBinding& binding) {
  std::string line = cat("cohort: rank ", rank, " (local rank ", local_rank, "): gpu ",
                         binding.gpu >= 0 ? std::to_string(binding.gpu) : std::string("-"));
  const CpuBinding& cpu = binding.cpu;
  if (!cpu.bound()) return line + ", not bound\n";
  line += cat(", numa node ", cpu_list_text(cpu.numa_nodes), ", cpus ", cpu_list_text(cpu.cpus));
  return line +
         (cpu.apply ? "\n" : " (planned, not applied: the topology is not this machine's)\n");
}

}  // namespace cohort
