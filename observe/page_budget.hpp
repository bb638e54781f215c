// How much of the daemon's io thread the HTTP pages may take. A page is built on that thread, and
// a big one (a run's page of 10,000 events) takes a good part of a second, during which no
// heartbeat is answered: clients asking for it in a loop would starve the runs. Building time is
// a debt that drains at `share` of the time that passes; while it is over `limit`, pages are
// answered 503 (try again) instead of built. Pure (time passed in); owned by the HTTP server,
// io thread only.
#pragma once

#include <algorithm>
#include <chrono>

#include "common/clock.hpp"

namespace cohort::observe {

class PageBudget {
 public:
  PageBudget(std::chrono::milliseconds limit, double share) : limit_(limit), share_(share) {}

  /// Whether a page may be built now.
  bool allows(SteadyTime now) {
    drain(now);
    return debt_ < limit_;
  }

  /// A page was built from `start` to `end`.
  void spent(SteadyTime start, SteadyTime end) {
    drain(end);
    debt_ += std::chrono::duration_cast<std::chrono::microseconds>(end - start);
  }

 private:
  void drain(SteadyTime now) {
    if (now > drained_at_) {
      auto passed = std::chrono::duration_cast<std::chrono::microseconds>(now - drained_at_);
      auto paid = std::chrono::microseconds(static_cast<int64_t>(passed.count() * share_));
      debt_ = std::max(std::chrono::microseconds(0), debt_ - paid);
    }
    drained_at_ = std::max(drained_at_, now);
  }

  std::chrono::microseconds limit_;
  double share_;
  std::chrono::microseconds debt_{0};
  SteadyTime drained_at_{};
};

}  // namespace cohort::observe
