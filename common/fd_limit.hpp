// Raises this process's open-file limit to its hard limit, so that a daemon can hold thousands
// of connections without the user remembering `ulimit -n`, and puts the user's limit back in the
// children it starts. RendezvousDaemon::start() raises it (before any worker is spawned); the
// process spawner restores it in each child between fork and exec.
#pragma once

namespace cohort {

/// Returns the soft limit in force afterwards. The soft limit found by the first call is kept
/// for restore_inherited_fd_limit().
long raise_fd_limit();

/// Sets the soft limit back to the one this process started with, if raise_fd_limit() changed
/// it, so that workers get the limit the user gave, not the daemon's. Async-signal-safe.
void restore_inherited_fd_limit();

}  // namespace cohort
