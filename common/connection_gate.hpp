// Which new connections a server takes, and which strangers make room for them. A stranger (a
// connection that has not yet proven itself: a control hello or a proven request, a whole HTTP
// request) counts against two caps, one per remote address and one in total; a proven
// connection counts against the total cap on connections only, and is never evicted. When a cap
// is reached, the oldest stranger that counts against it is evicted to admit the newcomer, so
// silent strangers can hold memory and descriptors for a while but never lock out members and
// token holders. Pure: ids and addresses in, decisions out. Owned by the rendezvous daemon and
// by the HTTP server (one each); their io thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace cohort {

struct ConnectionLimits {
  size_t max_unproven_per_address = 64;
  size_t max_unproven = 1024;  ///< x kMaxFirstFrameBytes bounds what strangers can make us hold
  size_t max_connections = 16384;
};

/// What admit() decided: the newcomer is admitted when `refusal` is empty; `evict` lists the
/// strangers to close first (the gate no longer counts them).
struct Admission {
  std::string refusal;
  std::vector<uint64_t> evict;
  std::string why;  ///< why the first of `evict` goes, for the log
};

class ConnectionGate {
 public:
  explicit ConnectionGate(ConnectionLimits limits) : limits_(limits) {}

  /// Connection `id` (larger than every earlier one: ids grow with arrival) from `address`
  /// arrived. Admitted, it counts as a stranger.
  Admission admit(uint64_t id, const std::string& address);
  /// Connection `id` proved itself: no longer a stranger, never evicted.
  void proven(uint64_t id);
  /// Connection `id` closed (a no-op for one the gate evicted or never admitted).
  void closed(uint64_t id);

  size_t unproven() const { return strangers_.size(); }
  size_t connections() const { return strangers_.size() + proven_.size(); }

 private:
  void forget_stranger(uint64_t id);
  void evict(uint64_t id, std::string why, Admission& admission);

  ConnectionLimits limits_;
  std::map<uint64_t, std::string> strangers_;  ///< id -> address, oldest first
  std::map<std::string, std::set<uint64_t>> strangers_by_address_;
  std::set<uint64_t> proven_;
};

}  // namespace cohort
