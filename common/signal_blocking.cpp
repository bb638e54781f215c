#include "common/signal_blocking.hpp"

#include <pthread.h>

#include <initializer_list>

namespace cohort {

namespace {

// Every signal, less the ones a fault raises on the thread that faulted (the kernel delivers
// those even when blocked, by killing the process, which would lose a sanitizer's report).
sigset_t asynchronous_signals() {
  sigset_t signals;
  ::sigfillset(&signals);
  for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS})
    ::sigdelset(&signals, fault);
  return signals;
}

}  // namespace

SignalsBlocked::SignalsBlocked() {
  sigset_t signals = asynchronous_signals();
  ::pthread_sigmask(SIG_BLOCK, &signals, &previous_);
}

SignalsBlocked::~SignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

void unblock_signals_in_child() {
  for (int signal = 1; signal < NSIG; ++signal) {
    struct sigaction current = {};
    if (::sigaction(signal, nullptr, &current) != 0) continue;  // none, or one glibc keeps
    if (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN) continue;
    ::signal(signal, SIG_DFL);
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

void block_signals_until_exit() {
  sigset_t signals = asynchronous_signals();
  ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

}  // namespace cohort
