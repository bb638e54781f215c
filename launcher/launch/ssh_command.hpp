// The command lines of `cohort launch`: the system ssh's argv for one host (BatchMode, connect
// timeout, keep-alives, port, -o options) and the shell line that host runs (cd to the launching
// directory, then `exec env NAME=value ... cohort run ...`), every word quoted for a POSIX
// shell. Pure; any thread.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort {

struct SshSettings {
  std::string program = "ssh";
  int port = 0;                      ///< 0: ssh's own default (or its config)
  int connect_timeout_seconds = 10;  ///< ConnectTimeout
  std::vector<std::string> options;  ///< each passed as -o OPTION
  /// Connection sharing: the pre-check's connection becomes a master (ControlPersist) that the
  /// run's ssh reuses, so each host pays for one handshake. Empty: no sharing.
  std::string control_path;
};

enum class SshRole {
  Master,  ///< opens the shared connection (pre-check)
  Client,  ///< uses it when it is there, else connects itself (the run)
};

/// ssh's argv (argv[0] = program) to run `remote_line` on `host`, stdin kept as a pipe (-T).
std::vector<std::string> ssh_argv(const SshSettings& ssh, const std::string& host,
                                  const std::string& remote_line, SshRole role = SshRole::Client);

/// ssh's argv that tells the shared connection to `host` to close (-O exit).
std::vector<std::string> ssh_close_master_argv(const SshSettings& ssh, const std::string& host);

/// Whether the user's --ssh-option already decides connection sharing (then cohort does not).
bool user_controls_sharing(const std::vector<std::string>& options);

/// 'text' with every ' written as '\'' (a word in any POSIX shell); bare when it is safe.
std::string shell_quote(std::string_view text);

struct RemoteCommand {
  std::string working_dir;  ///< empty: the remote login directory
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> argv;  ///< the program and its arguments
};

/// "cd -- DIR || exit 2; exec env A=1 B=2 PROGRAM ARGS..." with everything quoted (a PROGRAM
/// with '=' in it through /bin/sh -c, which env would take for a setting).
std::string remote_shell_line(const RemoteCommand& command);

}  // namespace cohort
