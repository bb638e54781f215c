#include "launcher/launch/srun_command.hpp"

namespace cohort {

// --overlap: the pre-check's steps and the run's may meet on a node, and the batch script's own
// step holds nothing back. --mpi=none: no PMI set-up for a process that is not MPI.
// --cpu-bind=none: the task gets every CPU of the job on its node, not the first one. Explicit
// task counts win over the job's SLURM_NTASKS* that srun would read from the environment.
std::vector<std::string> srun_argv(const SrunSettings& srun, const std::string& host,
                                   const std::string& remote_line) {
  std::vector<std::string> argv{srun.program,          "--nodes=1",          "--ntasks=1",
                                "--ntasks-per-node=1", "--nodelist=" + host, "--overlap",
                                "--mpi=none",          "--cpu-bind=none",    "--quiet"};
  argv.insert(argv.end(), srun.extra_args.begin(), srun.extra_args.end());
  argv.insert(argv.end(), {"/bin/sh", "-c", remote_line});
  return argv;
}

}  // namespace cohort
