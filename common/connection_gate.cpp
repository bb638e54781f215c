#include "common/connection_gate.hpp"

#include <limits>

#include "common/text.hpp"

namespace cohort {

Admission ConnectionGate::admit(uint64_t id, const std::string& address, Time now) {
  Admission admission;
  if (connections() >= limits_.max_connections) {
    if (auto victim = oldest_overdue(now)) {
      evict(*victim,
            cat("the oldest connection that has not proven itself, at ", limits_.max_connections,
                " connections"),
            admission);
    } else if (!waiting_.empty()) {
      evict(waiting_.begin()->first,
            cat("the oldest connection waiting to be read, at ", limits_.max_connections,
                " connections"),
            admission);
    } else {
      admission.refusal = cat("too many connections (", limits_.max_connections, ")");
      return admission;
    }
  }
  waiting_.emplace(id, address);
  std::set<uint64_t>& queue = waiting_by_address_[address];
  queue.insert(id);
  if (queue.size() == 1) first_waiting_.emplace(id, address);
  Admission started = pump(now);
  admission.start = std::move(started.start);
  for (uint64_t evicted : started.evict) admission.evict.push_back(evicted);
  if (admission.why.empty()) admission.why = std::move(started.why);
  return admission;
}

Admission ConnectionGate::pump(Time now) {
  Admission admission;
  while (start_one(now, admission)) {
  }
  return admission;
}

// Starts the oldest waiting connection there is room for, evicting an overdue stranger in its
// way; false when every waiting connection has only young strangers in its way (or none waits).
bool ConnectionGate::start_one(Time now, Admission& admission) {
  for (const auto& [id, address] : first_waiting_) {
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
  auto queue = waiting_by_address_.find(found->second);
  if (first_waiting_.erase({id, found->second}) > 0 && queue->second.size() > 1) {
    first_waiting_.emplace(*std::next(queue->second.begin()), found->second);
  }
  queue->second.erase(id);
  if (queue->second.empty()) waiting_by_address_.erase(queue);
  waiting_.erase(found);
}

}  // namespace cohort
