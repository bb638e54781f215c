// Starting a child program without the heap between its start and exec. On x86-64 (not under
// ASan or TSan) as posix_spawn does: clone3(CLONE_VM | CLONE_VFORK) runs the child on a stack of
// its own in the parent's memory while the calling thread waits for its exec, so nothing is
// copied; elsewhere by fork. Given a cgroup v2 directory, the child is born in that cgroup
// (CLONE_INTO_CGROUP: no migration, which waits for the cgroup lock's RCU grace period on a write
// to cgroup.procs). Then the caller's setup in the child, then execve; a setup or exec failure
// reaches the parent as an errno. Free functions; called from the agent's io thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <system_error>
#include <vector>

namespace cohort {

/// fork(), or with `cgroup_dir_fd` >= 0 (an open cgroup v2 directory) clone3 with
/// CLONE_INTO_CGROUP: returns like fork (0 in the child, -1 with errno set on failure). ENOSYS,
/// E2BIG or EINVAL mean a kernel without it (before Linux 5.7). Under ThreadSanitizer: fork, then
/// the child writes itself to the cgroup's cgroup.procs (or exits 126).
pid_t fork_into_cgroup(int cgroup_dir_fd);

/// What fork_exec runs: the program, argv[0] being `executable`, and the complete environment.
struct ExecPlan {
  std::string executable;
  std::vector<std::string> args;  ///< argv[1..]
  std::vector<std::string> env;   ///< "NAME=value"
  std::string argv0;              ///< empty: `executable`
};

/// Runs in the child between its start and exec: 0, or the errno that ends the child and that the
/// parent reports. Must use no heap, no lock and no more than a few KiB of stack: it may run in
/// the parent's own memory while the parent's other threads go on.
/// It runs with every asynchronous signal blocked; after it, each signal the parent caught goes
/// back to its default action and all are unblocked (unblock_signals_in_child), just before exec.
using ChildSetup = std::function<int()>;

/// Starts `plan` in a new child (born in the cgroup of `cgroup_dir_fd` when >= 0) after `setup`
/// and returns its pid once it has exec'ed; -1 with `error` set when it could not be started (the
/// child, if any, is reaped here then).
pid_t fork_exec(const ExecPlan& plan, int cgroup_dir_fd, const ChildSetup& setup,
                std::error_code& error);

}  // namespace cohort
