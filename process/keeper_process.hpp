// The group keeper's own program: `cohort __keeper <pipe fd> <agent pid> <stale ms> <log level>`,
// which GroupKeeper::start spawns from the agent's own binary (posix_spawn), so that nothing of
// the agent's threads, locks or memory comes with it. It reads the agent's lines from the pipe and
// kills what the agent leaves when it dies or stops showing signs of life (group_keeper.hpp).
// One thread: the process's own.
#pragma once

#include <string_view>

namespace cohort {

/// The hidden word after `cohort` that runs a keeper (never in --help).
inline constexpr std::string_view kKeeperCommand = "__keeper";

/// The keeper's main, given cohort's whole argv; returns only on bad arguments (the exit code,
/// said on stderr): someone other than an agent started it.
int run_keeper_process(int argc, char** argv);

}  // namespace cohort
