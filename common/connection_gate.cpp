#include "common/connection_gate.hpp"

#include <limits>

#include "common/text.hpp"

namespace cohort {

Admission ConnectionGate::admit(uint64_t id, const std::string& address, Time now) {
  Admission admission;
  if (connections() >= limits_.max_connections && !make_room(now, admission)) {
    admission.refusal = cat("too many connections (", limits_.max_connections, ")");
    return admission;
  }
  change_queue(address, [&](Queue& queue) {
    waiting_.emplace(id, Waiting{address});
    queue.unready.insert(id);
    unready_.insert(id);
  });
  Admission started = pump(now);
  admission.start = std::move(started.start);
  for (uint64_t evicted : started.evict) admission.evict.push_back(evicted);
  if (admission.why.empty()) admission.why = std::move(started.why);
  return admission;
}

// At the cap on connections: evicts the oldest overdue stranger, else the oldest waiting
// connection not ready, else the oldest waiting; false when there is none of these.
bool ConnectionGate::make_room(Time now, Admission& admission) {
  if (auto victim = oldest_overdue(now)) {
    evict(*victim,
          cat("the oldest connection that has not proven itself, at ", limits_.max_connections,
              " connections"),
          admission);
  } else if (!unready_.empty()) {
    evict(*unready_.begin(),
          cat("the oldest connection waiting to be read, at ", limits_.max_connections,
              " connections"),
          admission);
  } else if (!waiting_.empty()) {
    evict(waiting_.begin()->first,
          cat("the oldest connection waiting to be read (all waiting ones are ready), at ",
              limits_.max_connections, " connections"),
          admission);
  } else {
    return false;
  }
  return true;
}

void ConnectionGate::ready(uint64_t id) {
  auto found = waiting_.find(id);
  if (found == waiting_.end() || found->second.ready) return;
  change_queue(found->second.address, [&](Queue& queue) {
    queue.unready.erase(id);
    queue.ready.insert(id);
    unready_.erase(id);
    found->second.ready = true;
  });
}

Admission ConnectionGate::pump(Time now) {
  Admission admission;
  while (start_one(now, admission)) {
  }
  return admission;
}

// Starts the oldest ready waiting connection there is room for, else the oldest waiting one,
// evicting an overdue stranger in its way; false when every waiting connection has only young
// strangers in its way (or none waits).
bool ConnectionGate::start_one(Time now, Admission& admission) {
  for (const auto& [unready, id, address] : next_waiting_) {
    auto mine = strangers_by_address_.find(address);
    if (mine != strangers_by_address_.end() &&
        mine->second.size() >= limits_.max_unproven_per_address) {
      uint64_t oldest = *mine->second.begin();
      if (!overdue(strangers_.at(oldest), now)) continue;  // this address waits
      evict(oldest,
            cat("the oldest of ", limits_.max_unproven_per_address, " connections from ", address,
                " that have not proven themselves"),
            admission);
    } else if (strangers_.size() >= limits_.max_unproven) {
      auto victim = oldest_overdue(now);
      if (!victim) return false;  // every place is held by a young stranger
      evict(*victim,
            cat("the oldest of ", limits_.max_unproven,
                " connections that have not proven themselves"),
            admission);
    }
    uint64_t starting = id;
    std::string from = address;  // forget_waiting() invalidates both
    forget_waiting(starting);
    strangers_.emplace(starting, Stranger{from, now});
    strangers_by_age_.emplace(now, starting);
    strangers_by_address_[from].insert(starting);
    admission.start.push_back(starting);
    return true;
  }
  return false;
}

std::optional<ConnectionGate::Time> ConnectionGate::next_pump(Time now) const {
  if (waiting_.empty()) return std::nullopt;
  auto young = strangers_by_age_.upper_bound(
      {now - limits_.stranger_grace, std::numeric_limits<uint64_t>::max()});
  if (young == strangers_by_age_.end()) return std::nullopt;
  return young->first + limits_.stranger_grace;
}

bool ConnectionGate::overdue(const Stranger& stranger, Time now) const {
  return now - stranger.started >= limits_.stranger_grace;
}

std::optional<uint64_t> ConnectionGate::oldest_overdue(Time now) const {
  if (strangers_by_age_.empty()) return std::nullopt;
  auto [started, id] = *strangers_by_age_.begin();
  if (now - started < limits_.stranger_grace) return std::nullopt;
  return id;
}

void ConnectionGate::evict(uint64_t id, std::string why, Admission& admission) {
  forget_stranger(id);
  forget_waiting(id);
  admission.evict.push_back(id);
  if (admission.why.empty()) admission.why = std::move(why);
}

void ConnectionGate::proven(uint64_t id) {
  if (strangers_.count(id) == 0) return;
  forget_stranger(id);
  proven_.insert(id);
}

void ConnectionGate::closed(uint64_t id) {
  forget_stranger(id);
  forget_waiting(id);
  proven_.erase(id);
}

void ConnectionGate::forget_stranger(uint64_t id) {
  auto found = strangers_.find(id);
  if (found == strangers_.end()) return;
  auto by_address = strangers_by_address_.find(found->second.address);
  by_address->second.erase(id);
  if (by_address->second.empty()) strangers_by_address_.erase(by_address);
  strangers_by_age_.erase({found->second.started, id});
  strangers_.erase(found);
}

void ConnectionGate::forget_waiting(uint64_t id) {
  auto found = waiting_.find(id);
  if (found == waiting_.end()) return;
  const std::string address = found->second.address;  // erased with `found`
  change_queue(address, [&](Queue& queue) {
    queue.ready.erase(id);
    queue.unready.erase(id);
    unready_.erase(id);
    waiting_.erase(found);
  });
}

// Makes `change` to `address`'s queue of waiting connections (made if missing, dropped once
// empty), keeping next_waiting_ listing the queue's next connection.
void ConnectionGate::change_queue(const std::string& address,
                                  const std::function<void(Queue&)>& change) {
  unlist_next(address);
  change(waiting_by_address_[address]);
  list_next(address);
}

// Before a change to `address`'s queue: its next connection leaves next_waiting_.
void ConnectionGate::unlist_next(const std::string& address) {
  auto queue = waiting_by_address_.find(address);
  if (queue == waiting_by_address_.end()) return;
  uint64_t next = queue->second.next();
  next_waiting_.erase({!waiting_.at(next).ready, next, address});
}

// After a change to `address`'s queue: its next connection, if any, enters next_waiting_.
void ConnectionGate::list_next(const std::string& address) {
  auto queue = waiting_by_address_.find(address);
  if (queue == waiting_by_address_.end()) return;
  if (queue->second.empty()) {
    waiting_by_address_.erase(queue);
    return;
  }
  uint64_t next = queue->second.next();
  next_waiting_.emplace(!waiting_.at(next).ready, next, address);
}

}  // namespace cohort
