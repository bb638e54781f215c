// The seam between the code that runs children (WorkerGroup, cohort launch) and the OS: start a
// child from a SpawnRequest, hear once when it has ended, signal it or its process group, and
// kill a container of children with everything they started, however they detached.
// PosixProcessSpawner is the real one; tests use FakeProcessSpawner
// (tests/support/fake_process_spawner.hpp). Lent by reference by the owner; io thread only.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <system_error>
#include <vector>

#include "common/exit_status.hpp"
#include "process/cpu_binding.hpp"

namespace cohort {

struct SpawnRequest {
  std::string executable;         ///< absolute or relative path, already resolved
  std::string argv0;              ///< the program's argv[0]; empty: `executable`
  std::vector<std::string> args;  ///< argv[1..]
  std::vector<std::string> env;   ///< complete environment, "NAME=value"
  std::string working_dir;        ///< empty: the agent's own
  int stdin_fd = -1;              ///< -1: /dev/null
  int stdout_fd = -1;             ///< -1: inherit the agent's
  int stderr_fd = -1;             ///< -1: inherit the agent's
  std::vector<int> inherit_fds;   ///< kept open in the child under the same numbers
  bool new_process_group = true;
  bool die_with_parent = true;  ///< PR_SET_PDEATHSIG(SIGKILL)
  int container = 0;            ///< from ProcessSpawner::open_container; 0: none
  CpuBinding binding;           ///< CPUs and memory policy applied before exec; empty: none
};

class ProcessSpawner {
 public:
  using ExitHandler = std::function<void(ExitStatus)>;

  virtual ~ProcessSpawner() = default;
  /// Starts the child and returns its pid (its process group id too), or -1 with `error` set
  /// (for example ENOENT when the executable does not exist; the child never runs then).
  /// `on_exit` runs once, from the event loop, when the child has ended and been reaped.
  virtual pid_t spawn(const SpawnRequest& request, ExitHandler on_exit, std::error_code& error) = 0;
  /// kill(-group, signal): every process of the group.
  virtual void signal_group(pid_t group, int signal) = 0;
  /// kill(pid, signal): that process alone.
  virtual void signal_process(pid_t pid, int signal) = 0;

  /// A container for the children of one worker group: whatever they start, in any session or
  /// process group, can be killed with them. Returns its id for SpawnRequest::container, or 0
  /// when this spawner keeps no containers (the default; cohort launch's ssh sessions).
  virtual int open_container() { return 0; }
  /// SIGKILLs every process of `container`: its children and all they started.
  virtual void kill_container(int /*container*/) {}
  /// Kills what is left of `container` and forgets it.
  virtual void close_container(int /*container*/) {}
  /// Freezes (true) or thaws every process of `container`, whatever session it is in; nothing
  /// where the container is no cgroup.
  virtual void freeze_container(int /*container*/, bool /*frozen*/) {}
};

/// Resolves `name` like execvp: a name with a '/' is used as given, others are searched in PATH.
/// Returns an empty string when nothing executable is found.
std::string find_executable(const std::string& name, const std::string& path_variable);

}  // namespace cohort
