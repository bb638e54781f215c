// A Clock whose time stands still until the test advances it; timers that fall due fire then,
// in deadline order, each seeing now() at its own deadline. Lets tests cross shutdown timeouts
// and heartbeat limits without waiting. Owned by the test (it must outlive every timer it
// made); test thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>

#include "common/clock.hpp"

namespace cohort::test {

class FakeClock final : public Clock {
 public:
  SteadyTime now() const override { return now_; }
  std::unique_ptr<Timer> make_timer() override;

  /// Moves time on by `delay`, firing every timer due by then (also those armed while firing).
  void advance(SteadyDuration delay);
  /// Moves time on by `delay` without firing anything, as for a process that was stopped: the
  /// timers that fell due fire, late, at the next advance.
  void stall(SteadyDuration delay) { now_ += delay; }
  /// How many timers are armed.
  size_t armed() const { return waits_.size(); }

 private:
  class FakeTimer;
  struct Wait {
    SteadyTime deadline;
    Timer::Callback fire;
  };

  void arm(uint64_t timer, SteadyTime deadline, Timer::Callback fire);
  void disarm(uint64_t timer) { waits_.erase(timer); }

  SteadyTime now_ = SteadyTime{} + std::chrono::hours(1);
  uint64_t next_timer_ = 0;
  std::map<uint64_t, Wait> waits_;  ///< by timer; a timer waits at most once
};

}  // namespace cohort::test
