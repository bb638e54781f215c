// Turns `cohort run`'s parsed flags into an AgentConfig and a DaemonPlan, or a list of problems,
// each naming its flag. Pure: what it needs from the machine (environment variables, CPU and GPU
// counts, PATH, the host name) comes in a RunEnvironment. Main thread, at start.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "agent/agent_config.hpp"
#include "launcher/options/rendezvous_plan.hpp"
#include "launcher/options/run_environment.hpp"
#include "launcher/options/run_options.hpp"

namespace cohort {

struct ValidatedRun {
  AgentConfig config;
  DaemonPlan daemon;
  std::vector<std::string> problems;  ///< each starts with the flag it is about
  std::vector<std::string> warnings;  ///< accepted, but not (fully) applied; each names its flag
  std::vector<std::string> notes;     ///< how a flag was taken, said at -v; each names its flag
};

/// The checks that need neither a rendezvous endpoint nor the training script: every flag's
/// value, the worker count, the run id, the shutdown timeout, outputs, signals, and what the
/// rendezvous needs whatever its endpoint (--rdzv-conf, --store-ports). cohort launch runs these
/// on the run flags it forwards.
ValidatedRun validate_run_flags(const RunOptions& options, const RunEnvironment& machine);

/// Everything: validate_run_flags, then where the rendezvous is (plan_rendezvous) and what each
/// worker executes (python and the script, or --no-python's executable).
ValidatedRun validate_run_options(const RunOptions& options, const RunEnvironment& machine);

/// --nnodes "N" or "MIN:MAX" as {MIN, MAX}; {1, 1}, with the problem added to `problems`, when
/// it is malformed.
std::pair<int, int> parse_nnodes(const std::string& text, std::vector<std::string>& problems);

/// A uuid-like random run id (8-4-4-4-12 hex), as torchrun's --standalone makes.
std::string random_run_id();

}  // namespace cohort
