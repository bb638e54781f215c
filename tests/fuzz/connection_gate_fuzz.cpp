// libFuzzer target: the connection gate (common/connection_gate.hpp) under connections whose
// arrivals, addresses, proofs, closes and timing the fuzzer chooses, with small limits, driven as
// GateKeeper drives it (a pump after every proof, readiness and close, and when next_pump() says).
// Checks, against a model of every connection, that a proven connection (a member) is never
// evicted, nor a stranger still within its grace, nor a ready waiting one while one not ready
// waits; that no waiting connection starts while a ready one from its address waits; that the
// caps on strangers per address and in all, and on connections, hold; that no connection waits
// while there is room for it; and that next_pump() is always later than now (a keeper's timer
// would otherwise spin).
#include <fuzzer/FuzzedDataProvider.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "common/connection_gate.hpp"

namespace {

using cohort::Admission;
using cohort::ConnectionGate;
using cohort::ConnectionLimits;
using Ms = std::chrono::milliseconds;
using Time = ConnectionGate::Time;

void require(bool condition) {
  if (!condition) std::abort();
}

enum class State { Waiting, Stranger, Proven };

struct Connection {
  std::string address;
  State state = State::Waiting;
  bool ready = false;  // while waiting: its proof has all come
  Time started{};      // as a stranger
};

class Harness {
 public:
  explicit Harness(FuzzedDataProvider& in) : in_(in), gate_(pick_limits()) {}

  void step() {
    switch (in_.ConsumeIntegralInRange(0, 8)) {
      case 0:
      case 1:
      case 2:
        return arrive();
      case 3:
        return prove();
      case 4:
        return close();
      case 5:
        return make_ready();
      default:
        return pass_time();
    }
  }

 private:
  ConnectionLimits pick_limits() {
    limits_.max_unproven_per_address = in_.ConsumeIntegralInRange<size_t>(1, 4);
    limits_.max_unproven = in_.ConsumeIntegralInRange<size_t>(1, 8);
    limits_.max_connections = in_.ConsumeIntegralInRange<size_t>(1, 16);
    limits_.stranger_grace = Ms(in_.ConsumeIntegralInRange(0, 3) * 500);
    return limits_;
  }

  void arrive() {
    uint64_t id = next_id_++;
    std::string address = "10.0.0." + std::to_string(in_.ConsumeIntegralInRange(1, 4));
    Admission admission = gate_.admit(id, address, now_);
    if (!admission.refusal.empty()) {
      require(admission.evict.empty() && admission.start.empty());
      require(model_.size() >= limits_.max_connections);  // refused only at the cap
      for (const auto& [other, connection] : model_) {    // with nothing that could make room
        require(connection.state == State::Proven ||
                (connection.state == State::Stranger && !overdue(connection)));
      }
      return check();
    }
    model_[id] = Connection{address};
    carry_out(admission, id);
  }

  void prove() {
    if (auto id = pick(State::Stranger)) {
      gate_.proven(*id);
      model_[*id].state = State::Proven;
      carry_out(gate_.pump(now_));
    }
  }

  void make_ready() {
    if (auto id = pick(State::Waiting)) {
      gate_.ready(*id);
      model_[*id].ready = true;
      carry_out(gate_.pump(now_));
    }
  }

  void close() {
    if (model_.empty()) return;
    auto it = model_.begin();
    std::advance(it, in_.ConsumeIntegralInRange<size_t>(0, model_.size() - 1));
    gate_.closed(it->first);
    model_.erase(it);
    carry_out(gate_.pump(now_));
  }

  void pass_time() {
    Time until = now_ + Ms(in_.ConsumeIntegralInRange(0, 2000));
    for (int woken = 0;; ++woken) {
      require(woken < 10000);
      auto at = gate_.next_pump(now_);
      if (!at || *at > until) break;
      now_ = *at;
      carry_out(gate_.pump(now_));
    }
    now_ = until;
    carry_out(gate_.pump(now_));  // a close or proof may come first; a pump here is harmless
  }

  // What the keeper does with a decision: close the evicted, start the started. `newcomer`: the
  // connection admitted with it (0: none), which arrived after any waiting one was evicted.
  void carry_out(const Admission& admission, uint64_t newcomer = 0) {
    for (uint64_t id : admission.evict) {
      auto found = model_.find(id);
      require(found != model_.end());
      const Connection& connection = found->second;
      require(connection.state != State::Proven);                          // a member
      require(connection.state == State::Waiting || overdue(connection));  // within its grace
      if (connection.state == State::Waiting && connection.ready)
        require(!waits(false, {}, newcomer));
      model_.erase(found);
    }
    for (uint64_t id : admission.start) {
      auto found = model_.find(id);
      require(found != model_.end() && found->second.state == State::Waiting);
      found->second.state = State::Stranger;
      found->second.started = now_;
    }
    for (uint64_t id : admission.start) {
      const Connection& connection = model_.at(id);
      if (!connection.ready) require(!waits(true, connection.address));
    }
    check();
  }

  // Whether a connection waits that is `ready` (or not), from `address` ("": from anywhere),
  // other than `besides`.
  bool waits(bool ready, const std::string& address, uint64_t besides = 0) const {
    for (const auto& [id, connection] : model_) {
      if (id != besides && connection.state == State::Waiting && connection.ready == ready &&
          (address.empty() || connection.address == address))
        return true;
    }
    return false;
  }

  void check() {
    std::map<std::string, size_t> strangers_from;
    size_t strangers = 0, waiting = 0;
    for (const auto& [id, connection] : model_) {
      if (connection.state == State::Stranger) ++strangers, ++strangers_from[connection.address];
      if (connection.state == State::Waiting) ++waiting;
    }
    require(gate_.unproven() == strangers && gate_.waiting() == waiting);
    size_t ready = 0;
    for (const auto& [id, connection] : model_)
      ready += connection.state == State::Waiting && connection.ready;
    require(gate_.ready_waiting() == ready);
    require(gate_.connections() == model_.size() && model_.size() <= limits_.max_connections);
    require(strangers <= limits_.max_unproven);
    for (const auto& [address, count] : strangers_from) {
      require(count <= limits_.max_unproven_per_address);
    }
    // Nobody waits while there is room: each waiting address is held up by young strangers.
    for (const auto& [id, connection] : model_) {
      if (connection.state != State::Waiting) continue;
      bool address_full = strangers_from[connection.address] >= limits_.max_unproven_per_address;
      bool all_full = strangers >= limits_.max_unproven;
      require(address_full || all_full);
    }
    std::optional<Time> at = gate_.next_pump(now_);
    require(!at || *at > now_);
  }

  std::optional<uint64_t> pick(State state) {
    std::vector<uint64_t> ids;
    for (const auto& [id, connection] : model_) {
      if (connection.state == state) ids.push_back(id);
    }
    if (ids.empty()) return std::nullopt;
    return ids[in_.ConsumeIntegralInRange<size_t>(0, ids.size() - 1)];
  }

  bool overdue(const Connection& connection) const {
    return now_ - connection.started >= limits_.stranger_grace;
  }

  FuzzedDataProvider& in_;
  ConnectionLimits limits_;
  ConnectionGate gate_;
  std::map<uint64_t, Connection> model_;
  uint64_t next_id_ = 1;
  Time now_ = Time(std::chrono::hours(24 * 30));
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Harness harness(in);
  for (int steps = 0; steps < 500 && in.remaining_bytes() > 0; ++steps) harness.step();
  return 0;
}
