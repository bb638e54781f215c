// A process started by a test (cohort, cohortd, python, ...), in its own process group, with
// stdout and stderr captured to files. The destructor kills the whole group and reaps it, so no
// test leaves a process behind. Test thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_status.hpp"

namespace cohort::test {

struct ChildOptions {
  std::map<std::string, std::string> env;  ///< added to (or replacing in) the test's environment
  std::vector<std::string> unset_env;
  std::string working_dir;
  std::string output_dir;  ///< where stdout/stderr files go; required
  std::string name = "child";
};

class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, ChildOptions options);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int signal) const;
  /// Waits for the exit; nullopt on timeout (the process is left running).
  std::optional<ExitStatus> wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  std::string out() const;
  std::string err() const;
  /// Both streams, for a failing check's message.
  std::string output() const;

 private:
  pid_t pid_ = -1;
  std::string stdout_path_, stderr_path_;
  std::optional<ExitStatus> status_;
};

/// True while `pid` exists and is not a zombie.
bool process_alive(pid_t pid);

/// Runs a command to completion and returns its exit status and combined output.
struct RunResult {
  ExitStatus status;
  std::string out, err;
};
RunResult run_to_end(const std::vector<std::string>& argv, ChildOptions options,
                     std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace cohort::test
