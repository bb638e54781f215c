// The real clock of a process: std::chrono::steady_clock, with timers on the io_context (each a
// steady_timer whose stale completions are dropped). Created by each process's main, or by what
// owns the io_context, and lent by reference as a Clock. io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>

#include "common/clock.hpp"

namespace cohort {

class AsioClock final : public Clock {
 public:
  explicit AsioClock(boost::asio::io_context& io) : io_(io) {}
  SteadyTime now() const override { return std::chrono::steady_clock::now(); }
  std::unique_ptr<Timer> make_timer() override;

 private:
  boost::asio::io_context& io_;
};

}  // namespace cohort
