// --health-check: the node's own health command, run before the node joins a round (its first,
// and each after a restart) and again every interval while it is unhealthy. `/bin/sh -c CMD` in
// its own process group with the agent's environment, and a deadline after which the whole group
// is killed. A non-zero exit, a signal or the deadline makes the node unhealthy, with the last
// lines the command printed as the reason. Owned by the Agent; io thread.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/health_settings.hpp"
#include "common/exit_status.hpp"
#include "process/process_spawner.hpp"

namespace cohort {

/// Why the node is unhealthy ("" when it is healthy): the command's status, or that it ran out
/// of time, with the tail of its output (at most a few lines of 2 KiB in all).
std::string health_problem(const ExitStatus& status, bool timed_out,
                           std::chrono::milliseconds timeout, const std::string& output);

class HealthCheck {
 public:
  using Done = std::function<void(const std::string& problem)>;

  HealthCheck(boost::asio::io_context& io, ProcessSpawner& spawner, HealthSettings settings,
              std::vector<std::string> env);
  ~HealthCheck();
  HealthCheck(const HealthCheck&) = delete;
  HealthCheck& operator=(const HealthCheck&) = delete;

  /// Runs the command; `done` gets the problem ("" healthy) once it ended. One at a time: a call
  /// while one runs only replaces the callback.
  void run(Done done);
  bool running() const { return pid_ > 0; }
  const HealthSettings& settings() const { return settings_; }

 private:
  void finished(const ExitStatus& status);

  ProcessSpawner& spawner_;
  HealthSettings settings_;
  std::vector<std::string> env_;
  boost::asio::steady_timer deadline_;
  Done done_;
  pid_t pid_ = -1;
  int output_fd_ = -1;  ///< a memfd the command writes its stdout and stderr to
  bool timed_out_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cohort
