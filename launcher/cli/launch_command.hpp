// `cohort launch`: plans the hosts from the flags, the hostfile and this machine, then runs
// `cohort run` on every host over ssh until the job ends. Main thread.
#pragma once

#include "launcher/launch/launch_plan.hpp"
#include "launcher/options/cli_fwd.hpp"

namespace cohort {

/// Runs `cohort launch` with the flags `app` parsed into `options`; returns cohort's exit code.
int launch_command(const CLI::App& app, LaunchOptions& options);

}  // namespace cohort
