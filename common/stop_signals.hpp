// The termination signals that `cohort run` and `cohort launch` take, and nohup's exception.
// Each takes SIGINT, SIGTERM, SIGQUIT and SIGHUP through its signal_set, except SIGHUP when the
// process started with it ignored (`nohup cohort run ... &`): then a closed terminal's hangup
// stops nothing, and the programs cohort starts (workers, health checks, ssh) inherit the
// ignore, as from a shell (a program may catch SIGHUP again: an ssh sharing a connection does).
// Pure reads of the process's dispositions; the child-side check is async-signal-safe.
#pragma once

#include <csignal>
#include <vector>

namespace cohort {

/// SIGINT, SIGTERM, SIGQUIT and, unless it is ignored now, SIGHUP. Read before any handler for
/// them is installed (at the start of the process), so that "ignored" means inherited.
std::vector<int> stop_signals_to_take();

/// True when `signal` is ignored in this process now (read at start: ignored since its start).
/// Async-signal-safe.
bool signal_ignored(int signal);

/// True when SIGHUP is ignored in this process. Async-signal-safe: a forked child asks it
/// before resetting its signals, to keep nohup's ignore for the program it executes.
inline bool hangup_ignored() { return signal_ignored(SIGHUP); }

}  // namespace cohort
