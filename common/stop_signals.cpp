#include "common/stop_signals.hpp"

#include <signal.h>

namespace cohort {

bool signal_ignored(int signal) {
  struct sigaction current {};
  return ::sigaction(signal, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

std::vector<int> stop_signals_to_take() {
  std::vector<int> signals{SIGINT, SIGTERM, SIGQUIT};
  if (!hangup_ignored()) signals.push_back(SIGHUP);
  return signals;
}

}  // namespace cohort
