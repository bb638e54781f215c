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

void block_signals_until_exit() {
  sigset_t signals = asynchronous_signals();
  ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

}  // namespace cohort
