#include "process/child_reaper.hpp"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include "process/process_tree.hpp"

namespace cohort {

ChildReaper::ChildReaper(boost::asio::io_context& io) : sigchld_(io, SIGCHLD) {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  arm();
}

void ChildReaper::watch(pid_t pid, ExitHandler handler) { handlers_[pid] = std::move(handler); }

void ChildReaper::arm() {
  sigchld_.async_wait([this](const boost::system::error_code& error, int) {
    if (error) return;
    reap_now();
    arm();
  });
}

void ChildReaper::reap_now() {
  bool orphan_reaped = false;
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;  // nothing more has exited (0), or no children left (-1, ECHILD)
    auto found = handlers_.find(pid);
    if (found == handlers_.end()) {  // an orphaned grandchild or a helper: just reaped
      orphan_reaped = true;
      continue;
    }
    ExitHandler handler = std::move(found->second);
    handlers_.erase(found);
    handler(ExitStatus::from_wait_status(status));
  }
  // A dead orphan's own children are orphans now.
  if (orphan_reaped && sweep_) sweep();
}

void ChildReaper::kill_orphans(std::vector<pid_t> spared) {
  sweep_ = Sweep{std::move(spared), std::chrono::steady_clock::now() + kOrphanSweep};
  sweep();
}

void ChildReaper::sweep() {
  if (std::chrono::steady_clock::now() > sweep_->until) return sweep_.reset();
  pid_t self = ::getpid();
  std::vector<pid_t> orphans;
  for (pid_t child : children_now(self)) {
    if (handlers_.count(child)) continue;
    const std::vector<pid_t>& spared = sweep_->spared;
    if (std::find(spared.begin(), spared.end(), child) != spared.end()) continue;
    orphans.push_back(child);
  }
  // None left: the sweep is over. Killed ones stay in the list until they are reaped (and their
  // reaping sweeps again).
  if (orphans.empty()) return sweep_.reset();
  kill_trees(orphans);
}

}  // namespace cohort
