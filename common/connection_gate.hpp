// Which new connections a server takes, and when. A stranger (a connection that has not yet
// proven itself: a control hello or a proven request, a whole HTTP request) counts against two
// caps, one per remote address and one in total; a proven connection counts against the total
// cap on connections only, and is never evicted. A stranger is young for `stranger_grace` after it
// started (time enough to say its first frame) and overdue after. A newcomer past a cap takes the
// place of the oldest overdue stranger in its way; with only young strangers in its way it waits,
// accepted but unread, until one proves itself, closes or turns overdue. So members behind one
// NAT'd address, which all prove themselves within their grace, are never evicted nor refused
// however many arrive at once (they start 64 at a time), while silent strangers hold their
// place for the grace at most once a newcomer needs it. Pure: ids, addresses and times in,
// decisions out. Owned by the rendezvous daemon and by the HTTP server (one each); their io
// thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cohort {

struct ConnectionLimits {
  size_t max_unproven_per_address = 64;
  size_t max_unproven = 1024;      ///< x kMaxFirstFrameBytes bounds what strangers can make us hold
  size_t max_connections = 16384;  ///< waiting, strangers and proven: descriptors
  /// How long a started stranger is safe from eviction; 0: the oldest stranger in the way of a
  /// newcomer is evicted at once, and no newcomer ever waits.
  std::chrono::milliseconds stranger_grace{0};
};

/// What admit() or pump() decided. `evict` lists the connections to close first (strangers, or at
/// the cap on connections waiting ones: the gate no longer counts them); `start` the connections
/// to begin reading now (challenge them), in order. A newcomer neither refused nor started waits,
/// unread, for a later pump() to start it.
struct Admission {
  std::string refusal;
  std::vector<uint64_t> evict;
  std::string why;  ///< why the first of `evict` goes, for the log
  std::vector<uint64_t> start;
};

class ConnectionGate {
 public:
  using Time = std::chrono::steady_clock::time_point;

  explicit ConnectionGate(ConnectionLimits limits) : limits_(limits) {}

  /// Connection `id` (larger than every earlier one: ids grow with arrival) from `address`
  /// arrived at `now`. Not refused, it waits its turn behind earlier ones and starts at once
  /// when its address and the total have room.
  Admission admit(uint64_t id, const std::string& address, Time now);
  /// Starts the waiting connections that room has been made for (since a stranger proved
  /// itself, closed, or turned overdue by `now`), oldest first.
  Admission pump(Time now);
  /// When pump() may next start a waiting connection by time alone (the next stranger to turn
  /// overdue), if any connection waits.
  std::optional<Time> next_pump(Time now) const;
  /// Connection `id` proved itself: no longer a stranger, never evicted.
  void proven(uint64_t id);
  /// Connection `id` closed (a no-op for one the gate evicted or never admitted).
  void closed(uint64_t id);

  size_t unproven() const { return strangers_.size(); }
  size_t waiting() const { return waiting_.size(); }
  size_t connections() const { return strangers_.size() + proven_.size() + waiting_.size(); }

 private:
  struct Stranger {
    std::string address;
    Time started;
  };

  bool overdue(const Stranger& stranger, Time now) const;
  bool start_one(Time now, Admission& admission);
  std::optional<uint64_t> oldest_overdue(Time now) const;
  void forget_stranger(uint64_t id);
  void forget_waiting(uint64_t id);
  void evict(uint64_t id, std::string why, Admission& admission);

  ConnectionLimits limits_;
  std::map<uint64_t, Stranger> strangers_;
  std::set<std::pair<Time, uint64_t>> strangers_by_age_;  ///< oldest started first
  std::map<std::string, std::set<uint64_t>> strangers_by_address_;
  std::map<uint64_t, std::string> waiting_;  ///< id -> address, oldest first
  std::map<std::string, std::set<uint64_t>> waiting_by_address_;
  std::set<std::pair<uint64_t, std::string>> first_waiting_;  ///< each address's oldest waiting
  std::set<uint64_t> proven_;
};

}  // namespace cohort
