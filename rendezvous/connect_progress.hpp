// What the agent says while it cannot reach the rendezvous: the first failed attempt at once when
// the name does not resolve (that rarely fixes itself), else once the failures have lasted a
// second (a daemon still starting is normal), then a line every ten seconds with the time left.
// Pure: time is passed in. One per connection attempt series; owned by RendezvousClient.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "common/clock.hpp"

namespace cohort {

/// What the agent does at the deadline, and the setting that sets it, for the lines.
struct DeadlineWords {
  std::string action = "giving up";
  std::string setting = "join_timeout";
};

class ConnectProgress {
 public:
  static constexpr std::chrono::milliseconds kFirstAfter{1000};
  static constexpr std::chrono::milliseconds kEvery{10000};

  ConnectProgress(std::string endpoint, SteadyTime started, SteadyTime give_up_at,
                  DeadlineWords deadline = {});

  /// One attempt failed at `now` for `reason`; the line to print, when one is due.
  std::optional<std::string> attempt_failed(SteadyTime now, const std::string& reason,
                                            bool unresolvable);

 private:
  std::string endpoint_;
  SteadyTime started_;
  SteadyTime give_up_at_;
  DeadlineWords deadline_;
  std::optional<SteadyTime> last_said_;
};

}  // namespace cohort
