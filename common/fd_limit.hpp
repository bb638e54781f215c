// Raises this process's open-file limit to its hard limit, so that a daemon can hold thousands
// of connections without the user remembering `ulimit -n`. Call once at start; any thread.
#pragma once

namespace cohort {

/// Returns the soft limit in force afterwards.
long raise_fd_limit();

}  // namespace cohort
