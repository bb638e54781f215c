// The command line that starts one host's `cohort run` as a Slurm job step (`cohort launch
// --launcher srun`, the default inside a Slurm job): srun on that node alone, one task, sharing
// the job's resources with the launch's other steps, with the node's CPUs left unbound (cohort
// binds its workers itself), and, in a job that asked for GPUs per task, the GPUs of all the
// host's slots. Pure; any thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cohort {

/// A job's GPUs per task (`sbatch --gpus-per-task=[type:]N`), which each step of one task would
/// otherwise inherit as its whole share of the node.
struct TaskGpus {
  std::string type;  ///< "a100" of "a100:2"; empty: any
  int count = 0;
  std::string variable;  ///< where it came from: SLURM_GPUS_PER_TASK or SLURM_TRES_PER_TASK
};

/// The GPUs per task of the job `env` belongs to: SLURM_GPUS_PER_TASK ("2", "a100:2"), else the
/// gpu entry of SLURM_TRES_PER_TASK ("cpu:4,gres/gpu:2", "gres/gpu=a100:2", "gpu:2"); nullopt
/// when neither gives one GPU kind and count.
std::optional<TaskGpus> job_gpus_per_task(const std::map<std::string, std::string>& env);

struct SrunSettings {
  std::string program = "srun";
  std::vector<std::string> extra_args;    ///< --launcher-args, before the command
  std::optional<TaskGpus> gpus_per_task;  ///< the job's; each step asks for its slots' worth
};

/// srun's argv (argv[0] = program) to run `remote_line` with /bin/sh on `host`, whose `slots`
/// are the job's tasks there; stdin stays a pipe to the task.
std::vector<std::string> srun_argv(const SrunSettings& srun, const std::string& host, int slots,
                                   const std::string& remote_line);

}  // namespace cohort
