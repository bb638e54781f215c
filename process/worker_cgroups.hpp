// The cgroups (v2) that hold the agent's worker groups, when the machine lets cohort make them
// (root, or a delegated cgroup): <own cgroup>/cohort-<agent pid>/group-<n>, one per worker
// group. A worker is born in its group's cgroup (clone3 CLONE_INTO_CGROUP; before Linux 5.7 it
// joins it between fork and exec), so everything it ever starts stays there, in whatever session or
// process group, and cgroup.kill ends all of it. Finding this process's cgroup from /proc's text is
// pure; the rest is file-system calls. Owned by the PosixProcessSpawner of the agent (created on
// the first worker group); io thread only. The GroupKeeper uses the free functions on the per-agent
// directory.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

/// Where the cgroup v2 hierarchy is mounted, from /proc/self/mountinfo's text: the mount point
/// of the first cgroup2 mount whose root holds `cgroup` (this process's cgroup, as
/// /proc/self/cgroup's "0::" line names it), joined with the rest of that path. Empty, with
/// `why` set, when there is no such mount.
std::string cgroup2_directory(std::string_view mountinfo, std::string_view cgroup,
                              std::string& why);

/// This process's cgroup v2 path from /proc/self/cgroup's text (its "0::" line), e.g.
/// "/user.slice/session-2.scope"; empty, with `why` set, when there is none.
std::string unified_cgroup_path(std::string_view proc_self_cgroup, std::string& why);

/// This process's cgroup v2 path, read from /proc/self/cgroup (unified_cgroup_path).
std::string own_cgroup_path(std::string& why);

/// The agent pid in the name of a per-agent directory ("cohort-<pid>" or "cohort-<pid>-<n>"), or
/// nullopt for any other name.
std::optional<pid_t> agent_of_cgroup(std::string_view name);

/// Writes "1" to `directory`/cgroup.kill: SIGKILL to every process of that cgroup and of the
/// cgroups below it. False when that cannot be written.
bool kill_cgroup(const std::string& directory);

/// Writes "1" (`frozen`) or "0" to `directory`/cgroup.freeze: every process of that cgroup and of
/// the cgroups below it stops (or runs again), whatever signals it blocks. False when that cannot
/// be written.
bool freeze_cgroup(const std::string& directory, bool frozen);

/// Removes `directory` and the cgroups below it, deepest first. True once it is gone; false while
/// something is still alive in it (EBUSY) or it cannot be removed.
bool remove_cgroup(const std::string& directory);

class WorkerCgroups {
 public:
  /// Creates <own cgroup>/cohort-<pid> and checks, with a child born in (or joining) a cgroup
  /// below it that exits at once, that workers can be placed there. First removes the empty
  /// directories that agents no longer alive left next to it (when something killed the keeper too:
  /// Slurm ending a step). Null, with `why` set, when they cannot (no cgroup v2 mount, neither root
  /// nor a delegated cgroup, no cgroup.kill before Linux 5.14, or COHORT_NO_CGROUP set).
  static std::unique_ptr<WorkerCgroups> create(boost::asio::io_context& io, std::string& why);
  /// Kills what is left in the per-agent directory and removes it (waits a little for that).
  ~WorkerCgroups();
  WorkerCgroups(const WorkerCgroups&) = delete;
  WorkerCgroups& operator=(const WorkerCgroups&) = delete;

  /// The per-agent directory, which holds every group's cgroup.
  const std::string& directory() const { return directory_; }
  /// Makes a new cgroup, group-<n>; returns n (> 0), or 0 when it cannot be made.
  int make_group();
  /// True when children are born in their cgroup (open_directory for fork_into_cgroup); false on
  /// kernels before 5.7, where a child joins it through open_procs.
  bool joins_at_birth() const { return joins_at_birth_; }
  /// `group`'s cgroup directory, open (close-on-exec) for clone3's CLONE_INTO_CGROUP; -1 when it
  /// cannot be opened.
  int open_directory(int group) const;
  /// `group`'s cgroup.procs, open for writing and close-on-exec: a child that writes "0" there
  /// between fork and exec joins the cgroup. -1 when it cannot be opened.
  int open_procs(int group) const;
  /// SIGKILLs every process of `group`'s cgroup.
  void kill(int group) const;
  /// Freezes or thaws every process of `group`'s cgroup (freeze_cgroup); false when it cannot.
  bool freeze(int group, bool frozen) const;
  /// Kills `group`'s processes and removes its cgroup once they are gone (retried on a timer
  /// for a few seconds).
  void remove(int group);

 private:
  WorkerCgroups(boost::asio::io_context& io, std::string directory, bool at_birth);
  std::string path_of(int group) const;
  void retry_removals();

  std::string directory_;
  bool joins_at_birth_;
  int next_group_ = 0;
  boost::asio::steady_timer removal_timer_;
  std::map<std::string, std::chrono::steady_clock::time_point> removing_;  ///< path: give up at
};

}  // namespace cohort
