// Inside a Slurm step, `cohort run`'s flags that the command line (or PET_*) left unset take
// SLURM_*'s values (slurm_env.hpp reads them). Pure; main thread, at start, between parsing the
// flags and validating them.
#pragma once

#include <string>
#include <vector>

#include "agent/worker_env.hpp"
#include "launcher/options/cli_fwd.hpp"
#include "launcher/options/run_options.hpp"

namespace cohort {

/// Fills from SLURM_* in `env` what `app` did not get: node count, run id, rendezvous endpoint
/// (c10d), node-rank hint, worker count, and SIGUSR1/SIGUSR2 forwarding. Returns one line per
/// value taken ("--nnodes 4 from SLURM_JOB_NUM_NODES=4"); problems go to `problems`. Outside a
/// Slurm step, changes nothing.
std::vector<std::string> apply_slurm_defaults(const CLI::App& app, RunOptions& options,
                                              const EnvMap& env,
                                              std::vector<std::string>& problems);

}  // namespace cohort
