#include "common/exit_status.hpp"

#include <sys/wait.h>

#include <ostream>

#include "common/signal_names.hpp"

namespace cohort {

ExitStatus ExitStatus::from_wait_status(int wait_status) {
  if (WIFSIGNALED(wait_status)) return killed_by(WTERMSIG(wait_status));
  return exited(WEXITSTATUS(wait_status));
}

std::string ExitStatus::describe() const {
  if (signaled) return "signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
  return "exit code " + std::to_string(code);
}

std::ostream& operator<<(std::ostream& out, const ExitStatus& status) {
  return out << status.describe();
}

}  // namespace cohort
