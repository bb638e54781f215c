// The hosts of the batch allocation `cohort launch` runs in, when it is given neither -H nor
// --hostfile, as mpirun finds them: Slurm's (SLURM_JOB_NODELIST, a host's slots from
// SLURM_TASKS_PER_NODE), PBS's (the file PBS_NODEFILE names, one line per slot) and LSF's
// (LSB_MCPU_HOSTS' "host slots" pairs, else the file LSB_DJOB_HOSTFILE names, else LSB_HOSTS).
// Pure: files are read through the reader it is given. Main thread, at start.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "launcher/launch/forwarded_env.hpp"
#include "launcher/launch/hostfile.hpp"

namespace cohort {

struct Allocation {
  std::string scheduler;  ///< "Slurm", "PBS" or "LSF"
  std::string source;     ///< where the hosts came from: "the PBS allocation (PBS_NODEFILE=/x)"
  HostSelection selection;
};

/// Reads a whole file; nullopt when it cannot.
using FileReader = std::function<std::optional<std::string>(const std::string& path)>;

/// The allocation `env` describes, first Slurm's, then PBS's, then LSF's; nullopt when `env`
/// names none. Its problems name the variable (a malformed node list, an unreadable node file,
/// slot counts that do not match the hosts).
std::optional<Allocation> find_allocation(const EnvVars& env, const FileReader& read_file);

}  // namespace cohort
