#include "tests/support/fake_clock.hpp"

namespace cohort::test {

class FakeClock::FakeTimer final : public Timer {
 public:
  FakeTimer(FakeClock& clock, uint64_t id) : clock_(clock), id_(id) {}
  ~FakeTimer() override { clock_.disarm(id_); }

  void start_at(SteadyTime deadline, Callback fire) override {
    clock_.arm(id_, deadline, std::move(fire));
  }
  void start_after(SteadyDuration delay, Callback fire) override {
    clock_.arm(id_, clock_.now() + delay, std::move(fire));
  }
  void cancel() override { clock_.disarm(id_); }

 private:
  FakeClock& clock_;
  uint64_t id_;
};

std::unique_ptr<Timer> FakeClock::make_timer() {
  return std::make_unique<FakeTimer>(*this, next_timer_++);
}

void FakeClock::arm(uint64_t timer, SteadyTime deadline, Timer::Callback fire) {
  waits_[timer] = Wait{deadline, std::move(fire)};
}

void FakeClock::advance(SteadyDuration delay) {
  SteadyTime until = now_ + delay;
  for (;;) {
    auto due = waits_.end();
    for (auto it = waits_.begin(); it != waits_.end(); ++it) {
      if (it->second.deadline <= until &&
          (due == waits_.end() || it->second.deadline < due->second.deadline))
        due = it;
    }
    if (due == waits_.end()) break;
    if (due->second.deadline > now_) now_ = due->second.deadline;
    Timer::Callback fire = std::move(due->second.fire);
    waits_.erase(due);
    fire();
  }
  now_ = until;
}

}  // namespace cohort::test
