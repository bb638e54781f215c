// --rdzv-conf key=value,... with torchrun's keys (join_timeout, last_call_timeout,
// heartbeat_timeout, keep_alive_interval, keep_alive_max_attempt, is_host, ...) and cohort's
// defaults, validated into one struct. Pure; main thread at start.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace cohort {

/// Floors of the heartbeat settings: faster heartbeats only load the daemon, and a timeout
/// within a couple of intervals drops healthy nodes (0.001/0.002 s reconnected 15 times a second).
constexpr std::chrono::milliseconds kMinHeartbeatInterval{50};
constexpr std::chrono::milliseconds kMinHeartbeatTimeout{200};

struct RdzvConf {
  std::chrono::milliseconds join_timeout{600'000};
  std::chrono::milliseconds last_call_timeout{2'000};
  std::chrono::milliseconds heartbeat_interval{1'000};
  std::chrono::milliseconds heartbeat_timeout{5'000};
  std::optional<bool> is_host;  ///< force (or forbid) embedding the daemon
  /// Keys neither cohort nor torchrun's own backends read: accepted, as torchrun does, and
  /// named in a warning (a typo of a known key shows).
  std::vector<std::string> unknown_keys;
};

/// Parses `text`; each problem names --rdzv-conf and the key; an unknown key is no problem (see
/// RdzvConf::unknown_keys). Booleans (is_host) read as torchrun's do. keep_alive_interval must be
/// at least kMinHeartbeatInterval, heartbeat_timeout at least kMinHeartbeatTimeout and twice the
/// interval.
RdzvConf parse_rdzv_conf(const std::string& text, std::vector<std::string>& problems);

}  // namespace cohort
