// Driving an io_context from a test thread in bounded steps: let what is ready happen, or run
// until a condition holds (at most 5 s of wall time). For component tests whose objects live on
// the test's own io_context. Test thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>

#include "tests/support/wait_until.hpp"

namespace cohort::test {

/// Runs `io` for 100 ms of wall time: what is ready happens.
inline void settle(boost::asio::io_context& io) {
  io.restart();
  io.run_for(std::chrono::milliseconds(100));
}

/// Runs `io` until `condition` holds; false if it did not within 5 s.
inline bool run_io_until(boost::asio::io_context& io, const std::function<bool()>& condition) {
  return wait_until(
      [&] {
        io.restart();
        io.run_for(std::chrono::milliseconds(5));
        return condition();
      },
      std::chrono::seconds(5));
}

}  // namespace cohort::test
