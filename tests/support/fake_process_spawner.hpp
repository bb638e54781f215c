// A ProcessSpawner that starts nothing: it records every spawn, signal and container call, and a
// child "runs" until the test ends it with exit(). Like a real child, a fake one holds its stdout
// and stderr descriptors (duplicates) until it exits, and the test can write lines to them. Owned
// by the test; test thread only.
#pragma once

#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "process/process_spawner.hpp"

namespace cohort::test {

class FakeProcessSpawner final : public ProcessSpawner {
 public:
  struct Child {
    pid_t pid = -1;
    SpawnRequest request;  ///< as given, with the descriptor numbers the parent passed
    ExitHandler on_exit;
    int stdout_fd = -1;  ///< the child's copies, closed when it exits
    int stderr_fd = -1;
    int heartbeat_fd = -1;  ///< its copy of the first inherited descriptor (COHORT_HEARTBEAT_FD)
    bool exited = false;
  };
  struct Signal {
    pid_t target = -1;
    int signal = 0;
    bool group = false;  ///< signal_group (else signal_process)
  };

  ~FakeProcessSpawner() override;

  pid_t spawn(const SpawnRequest& request, ExitHandler on_exit, std::error_code& error) override;
  void signal_group(pid_t group, int signal) override;
  void signal_process(pid_t pid, int signal) override;
  int open_container() override;
  void kill_container(int container) override;
  void close_container(int container) override;

  /// Spawning `executable` fails with ENOENT from now on.
  void fail_spawns_of(const std::string& executable) { missing_.insert(executable); }
  /// Writes `text` to the child's stderr (it must be piped or go to a file).
  void write_stderr(pid_t pid, std::string_view text);
  /// Writes to the child's heartbeat descriptor, as a worker beating would.
  void write_heartbeat(pid_t pid, std::string_view text);
  /// The child ends: its descriptors close, then its exit handler runs.
  void exit(pid_t pid, ExitStatus status);

  const std::vector<pid_t>& pids() const { return order_; }
  const Child& child(pid_t pid) const { return children_.at(pid); }
  bool running(pid_t pid) const { return !children_.at(pid).exited; }
  const std::vector<Signal>& signals() const { return signals_; }
  /// The signals sent to `group` with signal_group, in order.
  std::vector<int> group_signals(pid_t group) const;
  /// Containers opened so far (ids 1, 2, ...), and what happened to each: "kill" and "close".
  int containers_opened() const { return next_container_; }
  const std::vector<std::string>& container_calls(int container) const {
    return container_calls_[container];
  }

 private:
  pid_t next_pid_ = 40000;
  std::map<pid_t, Child> children_;
  std::vector<pid_t> order_;
  std::vector<Signal> signals_;
  std::set<std::string> missing_;
  int next_container_ = 0;
  mutable std::map<int, std::vector<std::string>> container_calls_;
};

}  // namespace cohort::test
