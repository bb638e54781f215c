// Carries out a ConnectionGate's decisions for a server: evicts and starts connections through
// its owner's callbacks, and pumps the gate again until it has nothing more to do whenever a
// stranger proves itself or closes, or (a timer on the owner's Clock) the next stranger turns
// overdue while connections wait. Owned by the control port's door and by the HTTP server (one
// each), which keep the connections themselves; their io thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/clock.hpp"
#include "common/connection_gate.hpp"

namespace cohort {

class GateKeeper {
 public:
  /// Closes connection `id` at once, for `why` (a stranger, or one still waiting).
  using Evict = std::function<void(uint64_t id, const std::string& why)>;
  /// Starts reading connection `id`, which has waited unread until now.
  using Start = std::function<void(uint64_t id)>;

  GateKeeper(ConnectionLimits limits, Clock& clock, Evict evict, Start start);
  GateKeeper(const GateKeeper&) = delete;
  GateKeeper& operator=(const GateKeeper&) = delete;

  /// Connection `id` (larger than every earlier one) from `address` arrived: the gate's decision.
  /// Unless it is a refusal, the owner makes the connection ready to start, then passes the
  /// decision on to let_in().
  Admission admit(uint64_t id, const std::string& address);
  /// Carries out `admission`, then pumps the gate until it decides nothing more; while
  /// connections wait, wakes itself when the next stranger turns overdue.
  void let_in(Admission admission);
  /// Connection `id` proved itself: never evicted; those waiting for its place may start.
  void proven(uint64_t id);
  /// Waiting connection `id` has sent its whole proof (its owner saw it come): it starts before
  /// those that have not, at once if there is room.
  void ready(uint64_t id);
  /// Connection `id` closed: those waiting for its place may start.
  void closed(uint64_t id);
  /// For good: no more evictions or starts (the gate still counts closes).
  void close();

  /// Connections the gate counts (proven, strangers and those waiting).
  size_t connections() const { return gate_.connections(); }
  size_t waiting() const { return gate_.waiting(); }
  size_t ready_waiting() const { return gate_.ready_waiting(); }

 private:
  void pump();

  ConnectionGate gate_;
  Clock& clock_;
  Evict evict_;
  Start start_;
  std::unique_ptr<Timer> wake_;  ///< armed while connections wait for a stranger's grace to end
  bool letting_in_ = false;      ///< in let_in(): closes there pump the gate after it
  bool closed_ = false;
};

}  // namespace cohort
