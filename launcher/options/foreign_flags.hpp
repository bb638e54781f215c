// Flags of the tools cohort replaces (mpirun, mpiexec, srun, the DeepSpeed launcher) that cohort
// does not take, each with what cohort offers instead: "--num_gpus" is "-N/--nproc-per-node".
// They are refused, as any unknown flag, but the message says where to go. Pure; main thread.
#pragma once

#include <string>
#include <vector>

namespace cohort {

/// What cohort has for `flag` (its name, without "=value"), another tool's flag; empty when it
/// is not one of those known.
std::string foreign_flag_hint(const std::string& flag);

/// Every flag foreign_flag_hint knows, for tests: none may be, or start, a flag of cohort's own.
std::vector<std::string> foreign_flag_names();

}  // namespace cohort
