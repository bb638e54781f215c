// torchrun's FileTimer protocol, the pure part: the requests FileTimerClient writes to the timer
// pipe (one JSON line each: version, pid, scope_id, expiration_time in seconds since the epoch,
// signal; a negative expiration_time releases the scope), the timers they set per (pid, scope),
// and which workers are due to be reaped with which signal. Wall-clock time (the protocol's) is
// passed in; no I/O. Owned by FileTimerServer; io thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort {

struct TimerRequest {
  pid_t pid = 0;
  std::string scope;
  double expiration_time = 0;  ///< seconds since the epoch; < 0: release
  int signal = 0;              ///< <= 0: an expired timer does not reap
};

/// A worker whose timer ran out: reap `pid` with `signal`.
struct ExpiredTimer {
  pid_t pid = 0;
  int signal = 0;
  std::string scope;
  double expiration_time = 0;
};

/// The longest the server's timer waits at once: an expiration further off (a client may write
/// 1e12 s) wakes it after this long to look again, instead of a delay no clock can hold.
inline constexpr std::chrono::hours kMaxTimerWait{24};
/// How long to wait from wall time `now` until `expiration` (both seconds since the epoch):
/// rounded up to a millisecond, from zero (past, or not a number) to kMaxTimerWait.
std::chrono::milliseconds timer_wait(double expiration, double now);

/// Parses one request line; nullopt (with `error` set) for anything else.
std::optional<TimerRequest> parse_timer_request(std::string_view line, std::string& error);

class FileTimers {
 public:
  /// More scopes than any training loop holds at once; a writer past it is refused, so a flood
  /// of distinct scopes cannot grow the agent without bound.
  static constexpr size_t kMaxTimers = 4096;

  /// Arms, moves or releases a scope; false (and nothing done) for a new scope past kMaxTimers.
  bool apply(const TimerRequest& request);
  /// Forgets every timer (a new round: the old workers are gone).
  void clear() { timers_.clear(); }
  /// The workers and the agent were stopped together for `seconds` (Ctrl-Z): every timer
  /// expires that much later, as its worker lost that time too.
  void postpone(double seconds);
  /// The earliest expiration of a timer that reaps, if any.
  std::optional<double> next_expiration() const;
  /// Per pid with an expired timer that reaps: the first such (by expiration). Their timers are
  /// forgotten, as torchrun's server forgets those of the workers it reaped.
  std::vector<ExpiredTimer> take_expired(double now);

 private:
  std::map<std::pair<pid_t, std::string>, TimerRequest> timers_;
};

}  // namespace cohort
