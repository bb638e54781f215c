// The command line that starts one host's `cohort run` as a Slurm job step (`cohort launch
// --launcher srun`, the default inside a Slurm job): srun on that node alone, one task, sharing
// the job's resources with the launch's other steps, with the node's CPUs left unbound (cohort
// binds its workers itself). Pure; any thread.
#pragma once

#include <string>
#include <vector>

namespace cohort {

struct SrunSettings {
  std::string program = "srun";
  std::vector<std::string> extra_args;  ///< --launcher-args, before the command
};

/// srun's argv (argv[0] = program) to run `remote_line` with /bin/sh on `host`; stdin stays a
/// pipe to the task.
std::vector<std::string> srun_argv(const SrunSettings& srun, const std::string& host,
                                   const std::string& remote_line);

}  // namespace cohort
