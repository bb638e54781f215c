// The steady time of a process and one-shot timers on it: the seam between code that waits and
// the clock it waits on. Clock and Timer are the interfaces; AsioClock (common/asio_clock.hpp) is
// the real clock, created by each process's main and lent by reference to what it builds. Tests
// use FakeClock (tests/support/fake_clock.hpp). io thread only. Free of Asio, so that the pure
// cores that take time can include it cheaply.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace cohort {

using SteadyTime = std::chrono::steady_clock::time_point;
using SteadyDuration = std::chrono::steady_clock::duration;

/// A one-shot timer. Its callback runs once, at or after the deadline, unless the timer is
/// cancelled, started again or destroyed first: then it never runs. Owned by whoever made it.
class Timer {
 public:
  using Callback = std::function<void()>;

  virtual ~Timer() = default;
  /// Arms the timer for `deadline`, replacing any earlier wait.
  virtual void start_at(SteadyTime deadline, Callback fire) = 0;
  /// Arms the timer for `delay` from now, replacing any earlier wait.
  virtual void start_after(SteadyDuration delay, Callback fire) = 0;
  virtual void cancel() = 0;
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime now() const = 0;
  virtual std::unique_ptr<Timer> make_timer() = 0;
};

}  // namespace cohort
