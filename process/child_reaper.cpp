#include "process/child_reaper.hpp"

#include <sys/prctl.h>
#include <sys/wait.h>

#include <csignal>

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
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;  // nothing more has exited (0), or no children left (-1, ECHILD)
    auto found = handlers_.find(pid);
    if (found == handlers_.end()) continue;  // an orphaned grandchild or a helper: just reaped
    ExitHandler handler = std::move(found->second);
    handlers_.erase(found);
    handler(ExitStatus::from_wait_status(status));
  }
}

}  // namespace cohort
