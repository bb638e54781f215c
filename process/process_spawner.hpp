// Starts one child process the way every worker must start: in its own process group, with
// stdin/stdout/stderr given as file descriptors, a complete environment, and SIGKILL as its
// parent-death signal. The only file that uses Boost.Process. Call from the io_context thread.
#pragma once

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <string>
#include <system_error>
#include <vector>

namespace cohort {

struct SpawnRequest {
  std::string executable;         ///< absolute or relative path, already resolved
  std::vector<std::string> args;  ///< argv[1..]
  std::vector<std::string> env;   ///< complete environment, "NAME=value"
  std::string working_dir;        ///< empty: the agent's own
  int stdin_fd = -1;              ///< -1: /dev/null
  int stdout_fd = -1;             ///< -1: inherit the agent's
  int stderr_fd = -1;             ///< -1: inherit the agent's
  bool new_process_group = true;
  bool die_with_parent = true;  ///< PR_SET_PDEATHSIG(SIGKILL)
  /// A GroupKeeper pipe (or -1): the child writes "+<its pid>\n" there before exec, so that its
  /// group is known to the keeper before the program can start children of its own.
  int announce_group_fd = -1;
};

/// Starts the process and returns its pid (its process group id too), or -1 with `error` set
/// (for example ENOENT when the executable does not exist; the child never runs then).
pid_t spawn_process(boost::asio::any_io_executor executor, const SpawnRequest& request,
                    std::error_code& error);

/// Resolves `name` like execvp: a name with a '/' is used as given, others are searched in PATH.
/// Returns an empty string when nothing executable is found.
std::string find_executable(const std::string& name, const std::string& path_variable);

}  // namespace cohort
