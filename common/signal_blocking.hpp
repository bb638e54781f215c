// Which threads take the process's signals, and what a forked child starts with. cohort's processes
// take theirs on the main thread, through an asio signal_set; a process-directed signal goes to any
// thread that does not block it, so the helper threads (the console writer, NVML's readers, an
// IoPool's threads, asio's resolver thread, which asio leaves open) start with every signal
// blocked. Once a process has decided its exit code, its main thread blocks them too: a late
// SIGTERM then stays pending and is dropped at exit, instead of ending the process by its default
// action after the signal_set is gone.
#pragma once

#include <signal.h>

namespace cohort {

/// Blocks every asynchronous signal on the calling thread while it lives, so that a thread it
/// starts meanwhile inherits the block; restores the thread's mask at the end of its scope.
/// Wrapped around each helper thread's start, on the starting thread.
class SignalsBlocked {
 public:
  SignalsBlocked();
  ~SignalsBlocked();
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t previous_;
};

/// In a child forked with every signal blocked (a SignalsBlocked around the fork): each signal
/// the parent caught goes back to its default action, ignored ones stay ignored, and then the
/// mask is emptied, so that no handler of the parent's (asio's, which writes to the parent's
/// signal pipe) ever runs in the child. Async-signal-safe.
void unblock_signals_in_child();

/// From now until exit the calling thread takes no asynchronous signal: one sent later stays
/// pending and ends with the process. For the main thread, once the exit code is decided.
void block_signals_until_exit();

}  // namespace cohort
