// Which new control connections the daemon takes: a stranger must say hello (or ask for status)
// within the hello timeout, and until then counts against two caps, one per remote address and
// one in total, so that slow or silent connections cannot hold the daemon's memory and
// descriptors. Proven connections count against a total cap only. Pure: counts in, decisions
// out. Owned by the daemon; io thread.
#pragma once

#include <cstddef>
#include <map>
#include <string>

namespace cohort {

struct ConnectionLimits {
  size_t max_unproven_per_address = 64;
  size_t max_unproven = 1024;  ///< x kMaxFirstFrameBytes bounds what strangers can make us hold
  size_t max_connections = 16384;
};

class ConnectionGate {
 public:
  explicit ConnectionGate(ConnectionLimits limits) : limits_(limits) {}

  /// A connection from `address` arrived: empty if it may stay (it now counts as unproven), else
  /// why it is refused.
  std::string admit(const std::string& address);
  /// The connection from `address` said hello: it no longer counts as unproven.
  void proven(const std::string& address);
  /// A connection admitted earlier closed; `was_proven` says which count it was in.
  void closed(const std::string& address, bool was_proven);

  size_t unproven() const { return unproven_; }
  size_t connections() const { return unproven_ + proven_; }

 private:
  void forget_unproven(const std::string& address);

  ConnectionLimits limits_;
  std::map<std::string, size_t> unproven_by_address_;
  size_t unproven_ = 0;
  size_t proven_ = 0;
};

}  // namespace cohort
