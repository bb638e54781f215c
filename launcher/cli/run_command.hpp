// `cohort run`: validates the flags, hosts the rendezvous daemon when this node should, and runs
// the agent until the job ends. Main thread.
#pragma once

#include "launcher/options/cli_fwd.hpp"
#include "launcher/options/run_options.hpp"

namespace cohort {

/// Runs `cohort run` with the flags `app` parsed into `options`; returns cohort's exit code.
int run_command(const CLI::App& app, RunOptions& options);

}  // namespace cohort
