// What a worker's binding shows outside the spawner: the variables that tell the worker where it
// runs (COHORT_CPU_LIST, COHORT_NUMA_NODE, and OMP_NUM_THREADS sized to its share unless the
// user set it) and the --report-bindings line. Pure; any thread.
#pragma once

#include <string>

#include "agent/worker_env.hpp"
#include "process/cpu_binding.hpp"

namespace cohort {

/// The variables of a bound worker; none for an unbound one.
EnvMap binding_variables(const CpuBinding& binding, const EnvMap& agent_env);

/// "cohort: rank 3 (local rank 3): gpu 3, numa node 1, cpus 8-15,40-47\n"; an unbound worker
/// says "not bound", a plan for another machine's topology "(planned, not applied)".
std::string binding_report_line(int rank, int local_rank, const WorkerBinding& binding);

}  // namespace cohort
