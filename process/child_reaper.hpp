// Reaps every child of this process when SIGCHLD arrives and hands the exit status of each
// watched pid to its handler. It also makes this process a child subreaper, so grandchildren
// orphaned by a worker are re-parented here and reaped too. Owned by the agent; io thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <functional>
#include <unordered_map>

#include "common/exit_status.hpp"

namespace cohort {

class ChildReaper {
 public:
  using ExitHandler = std::function<void(ExitStatus)>;

  explicit ChildReaper(boost::asio::io_context& io);
  ChildReaper(const ChildReaper&) = delete;
  ChildReaper& operator=(const ChildReaper&) = delete;

  /// Call right after spawning `pid`, before returning to the event loop.
  void watch(pid_t pid, ExitHandler handler);
  size_t watched() const { return handlers_.size(); }
  /// Reaps what has already exited without waiting for the signal (used at shutdown).
  void reap_now();

 private:
  void arm();

  boost::asio::signal_set sigchld_;
  std::unordered_map<pid_t, ExitHandler> handlers_;
};

}  // namespace cohort
