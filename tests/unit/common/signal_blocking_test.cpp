#include "common/signal_blocking.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <thread>

using namespace cohort;

namespace {

std::atomic<int> usr2_taken{0};

bool blocked_here(int signal) {
  sigset_t mask;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return ::sigismember(&mask, signal) == 1;
}

bool pending(int signal) {
  sigset_t signals;
  ::sigpending(&signals);
  return ::sigismember(&signals, signal) == 1;
}

}  // namespace

TEST_CASE("a helper thread started under SignalsBlocked takes no asynchronous signal",
          "[unit][common][signals]") {
  bool term = false, usr2 = false, segv = true;
  std::thread helper;
  {
    SignalsBlocked for_the_thread;
    CHECK(blocked_here(SIGTERM));
    helper = std::thread([&] {
      term = blocked_here(SIGTERM);
      usr2 = blocked_here(SIGUSR2);
      segv = blocked_here(SIGSEGV);
    });
  }
  helper.join();
  CHECK(term);
  CHECK(usr2);
  CHECK_FALSE(segv);  // a fault still reaches the thread that faulted (and a sanitizer's report)
  CHECK_FALSE(blocked_here(SIGTERM));  // the starting thread's mask is back
}

TEST_CASE("a signal sent after block_signals_until_exit stays pending, taken by no thread",
          "[unit][common][signals]") {
  struct sigaction count = {};
  struct sigaction previous = {};
  count.sa_handler = [](int) { usr2_taken.fetch_add(1); };
  ::sigaction(SIGUSR2, &count, &previous);
  sigset_t mask_before;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &mask_before);

  std::atomic<bool> done{false};
  std::thread helper;
  {
    SignalsBlocked for_the_thread;
    helper = std::thread([&] {
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  usr2_taken = 0;
  block_signals_until_exit();
  ::kill(::getpid(), SIGUSR2);  // process-directed: any thread that does not block it takes it
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(usr2_taken == 0);
  CHECK(pending(SIGUSR2));

  ::pthread_sigmask(SIG_SETMASK, &mask_before, nullptr);  // the test's own undoing
  for (int i = 0; i < 1000 && usr2_taken == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(usr2_taken == 1);
  done = true;
  helper.join();
  ::sigaction(SIGUSR2, &previous, nullptr);
}
