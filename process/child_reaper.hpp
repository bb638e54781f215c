// Reaps every child of this process when SIGCHLD arrives and hands the exit status of each
// watched pid to its handler. It also makes this process a child subreaper, so grandchildren
// orphaned by a worker are re-parented here and reaped too, and, asked to, kills those orphans
// (the fallback when worker groups have no cgroup). Owned by the agent (and by cohort launch,
// which never kills orphans); io thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/exit_status.hpp"

namespace cohort {

class ChildReaper {
 public:
  using ExitHandler = std::function<void(ExitStatus)>;
  /// How long kill_orphans goes on killing the orphans that the deaths of others set free.
  static constexpr std::chrono::seconds kOrphanSweep{5};

  explicit ChildReaper(boost::asio::io_context& io);
  ChildReaper(const ChildReaper&) = delete;
  ChildReaper& operator=(const ChildReaper&) = delete;

  /// Call right after spawning `pid`, before returning to the event loop.
  void watch(pid_t pid, ExitHandler handler);
  size_t watched() const { return handlers_.size(); }
  /// Reaps what has already exited without waiting for the signal (used at shutdown).
  void reap_now();
  /// SIGKILLs every child of this process that no handler watches (the orphans it inherited as
  /// subreaper, whatever session or process group they moved to), except `spared`, with
  /// everything below them. Until stop_killing_orphans, or for kOrphanSweep, the orphans that
  /// turn up later (children of those that die) are killed too, as the reaper reaps.
  void kill_orphans(std::vector<pid_t> spared);
  /// Leaves later orphans alone (a new worker group starts).
  void stop_killing_orphans() { sweep_.reset(); }

 private:
  struct Sweep {
    std::vector<pid_t> spared;
    std::chrono::steady_clock::time_point until;
  };

  void arm();
  void sweep();

  boost::asio::signal_set sigchld_;
  std::unordered_map<pid_t, ExitHandler> handlers_;
  std::optional<Sweep> sweep_;
};

}  // namespace cohort
