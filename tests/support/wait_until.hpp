// Waiting in tests: poll a condition until it holds or a deadline passes; never a bare sleep.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace cohort::test {

inline bool wait_until(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace cohort::test
