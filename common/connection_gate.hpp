// Which new connections a server takes, and when. A stranger (a connection that has not yet
// proven itself: a control hello or a proven request, a whole HTTP request) counts against two
// caps, one per remote address and one in total; a proven connection counts against the total
// cap on connections only, and is never evicted. A stranger is young for `stranger_grace` after it
// started (time enough to say its first frame) and overdue after. A newcomer past a cap takes the
// place of the oldest overdue stranger in its way; with only young strangers in its way it waits,
// accepted but unread, until one proves itself, closes or turns overdue. So members behind one
// NAT'd address, which all prove themselves within their grace, are never evicted nor refused
// however many arrive at once (they start 64 at a time), while silent strangers hold their
// place for the grace at most once a newcomer needs it. A waiting connection whose whole proof
// the owner saw arrive (it still waits its turn) is ready: ready ones start before the others and,
// at the cap on connections, are closed after them, so a flood of half-sent requests does not
// starve whole ones from the same address. Pure: ids, addresses and times in, decisions out.
// Owned by the rendezvous daemon and by the HTTP server (one each); their io thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
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
  /// itself, closed, or turned overdue by `now`): ready ones first, oldest first within each.
  Admission pump(Time now);
  /// Waiting connection `id` has sent its whole proof (its owner saw it come): it starts
  /// before every connection not ready, oldest first, and is closed after them at the cap on
  /// connections. A no-op for one not waiting.
  void ready(uint64_t id);
  /// When pump() may next start a waiting connection by time alone (the next stranger to turn
  /// overdue), if any connection waits.
  std::optional<Time> next_pump(Time now) const;
  /// Connection `id` proved itself: no longer a stranger, never evicted.
  void proven(uint64_t id);
  /// Connection `id` closed (a no-op for one the gate evicted or never admitted).
  void closed(uint64_t id);

  size_t unproven() const { return strangers_.size(); }
  size_t waiting() const { return waiting_.size(); }
  size_t ready_waiting() const { return waiting_.size() - unready_.size(); }
  size_t connections() const { return strangers_.size() + proven_.size() + waiting_.size(); }

 private:
  struct Stranger {
    std::string address;
    Time started;
  };
  struct Waiting {
    std::string address;
    bool ready = false;
  };
  /// One address's waiting connections, oldest first; it starts its oldest ready one first.
  struct Queue {
    std::set<uint64_t> ready;
    std::set<uint64_t> unready;
    bool empty() const { return ready.empty() && unready.empty(); }
    uint64_t next() const { return ready.empty() ? *unready.begin() : *ready.begin(); }
  };
  /// An address's next waiting connection: (not ready, id, address), the ready ones first.
  using Next = std::tuple<bool, uint64_t, std::string>;

  bool overdue(const Stranger& stranger, Time now) const;
  bool start_one(Time now, Admission& admission);
  std::optional<uint64_t> oldest_overdue(Time now) const;
  void forget_stranger(uint64_t id);
  void forget_waiting(uint64_t id);
  void change_queue(const std::string& address, const std::function<void(Queue&)>& change);
  void unlist_next(const std::string& address);
  void list_next(const std::string& address);
  bool make_room(Time now, Admission& admission);
  void evict(uint64_t id, std::string why, Admission& admission);

  ConnectionLimits limits_;
  std::map<uint64_t, Stranger> strangers_;
  std::set<std::pair<Time, uint64_t>> strangers_by_age_;  ///< oldest started first
  std::map<std::string, std::set<uint64_t>> strangers_by_address_;
  std::map<uint64_t, Waiting> waiting_;  ///< oldest first
  std::map<std::string, Queue> waiting_by_address_;
  std::set<Next> next_waiting_;  ///< each address's next to start
  std::set<uint64_t> unready_;   ///< waiting and not ready, oldest first
  std::set<uint64_t> proven_;
};

}  // namespace cohort
