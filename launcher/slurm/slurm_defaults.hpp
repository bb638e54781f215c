// Inside a Slurm step, `cohort run`'s flags that the command line (or PET_*) left unset take
// SLURM_*'s values (slurm_env.hpp reads them). Pure; main thread, at start, between parsing the
// flags and validating them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/worker_env.hpp"
#include "launcher/options/cli_fwd.hpp"
#include "launcher/options/run_options.hpp"

namespace cohort {

/// What apply_slurm_defaults did.
struct SlurmApplied {
  std::vector<std::string> taken;     ///< a line per value taken: "--nnodes 4 from SLURM_...=4"
  std::vector<std::string> problems;  ///< a node list that does not parse, a node id not a number
  std::map<std::string, std::string> variables;  ///< each flag taken -> the variables it came from
  /// With the endpoint taken from Slurm: what a refusal of the token there adds (another job or
  /// step may hold the derived port), for RendezvousSettings::refused_token_hint.
  std::string refused_token_hint;
};

/// Fills from SLURM_* in `env` what `app` did not get: node count, run id, rendezvous endpoint
/// (c10d), node-rank hint, worker count, and SIGUSR1/SIGUSR2 forwarding. Outside a Slurm step,
/// changes nothing.
SlurmApplied apply_slurm_defaults(const CLI::App& app, RunOptions& options, const EnvMap& env);

/// " (from SLURM_JOB_NUM_NODES in the environment)" when the flag `problem` is about took its
/// value from Slurm's variables, so that a user who never typed it sees where it came from.
std::string slurm_origin(const SlurmApplied& applied, const std::string& problem);

}  // namespace cohort
