// How an acceptor waits out a shortage of descriptors or memory: the pending connection stays in
// the backlog, so accepting again at once fails again at once (a busy loop and a flood of log
// lines). Each shortage doubles the wait (100 ms up to 1 s), a successful accept resets it, and a
// log line is due at most once a second. Pure, time passed in; one per acceptor, its thread.
#pragma once

#include <boost/system/error_code.hpp>
#include <chrono>

#include "common/log_throttle.hpp"

namespace cohort {

class AcceptBackoff {
 public:
  static constexpr std::chrono::milliseconds kFirstDelay{100};
  static constexpr std::chrono::milliseconds kMaxDelay{1000};
  static constexpr std::chrono::seconds kLogInterval{1};

  /// Out of descriptors (EMFILE, ENFILE) or memory: an error to wait out, not to retry at once.
  static bool is_shortage(const boost::system::error_code& error);

  /// After a shortage: how long to wait before accepting again.
  std::chrono::milliseconds next_delay();
  /// After a successful accept.
  void reset() { delay_ = std::chrono::milliseconds(0); }
  /// True at most once per kLogInterval.
  bool time_to_log(std::chrono::steady_clock::time_point now);

 private:
  std::chrono::milliseconds delay_{0};
  LogThrottle log_{kLogInterval};
};

}  // namespace cohort
