// At most one log line per interval for a repeated event (refused connections, accept failures),
// counting the lines left out so the next one can say how many. Pure, time passed in; owned by
// whoever logs the event, on its thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>

namespace cohort {

class LogThrottle {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit LogThrottle(std::chrono::milliseconds interval = std::chrono::seconds(1))
      : interval_(interval) {}

  /// True when a line is due now (then suppressed() is what was left out before it); false
  /// counts one more left out.
  bool due(TimePoint now) {
    if (last_ && now - *last_ < interval_) {
      ++pending_;
      return false;
    }
    last_ = now;
    suppressed_ = pending_;
    pending_ = 0;
    return true;
  }
  /// How many events were left out before the line that due() last allowed.
  size_t suppressed() const { return suppressed_; }

 private:
  std::chrono::milliseconds interval_;
  std::optional<TimePoint> last_;
  size_t pending_ = 0;
  size_t suppressed_ = 0;
};

}  // namespace cohort
