#include "common/connection_gate.hpp"

#include "common/text.hpp"

namespace cohort {

Admission ConnectionGate::admit(uint64_t id, const std::string& address) {
  Admission admission;
  auto from_address = strangers_by_address_.find(address);
  if (from_address != strangers_by_address_.end() &&
      from_address->second.size() >= limits_.max_unproven_per_address) {
    evict(*from_address->second.begin(),
          cat("the oldest of ", limits_.max_unproven_per_address, " connections from ", address,
              " that have not proven themselves"),
          admission);
  }
  if (!strangers_.empty() && strangers_.size() >= limits_.max_unproven) {
    evict(
        strangers_.begin()->first,
        cat("the oldest of ", limits_.max_unproven, " connections that have not proven themselves"),
        admission);
  }
  if (connections() >= limits_.max_connections) {
    if (strangers_.empty()) {
      admission.refusal = cat("too many connections (", limits_.max_connections, ")");
      return admission;
    }
    evict(strangers_.begin()->first,
          cat("the oldest connection that has not proven itself, at ", limits_.max_connections,
              " connections"),
          admission);
  }
  strangers_.emplace(id, address);
  strangers_by_address_[address].insert(id);
  return admission;
}

void ConnectionGate::evict(uint64_t id, std::string why, Admission& admission) {
  forget_stranger(id);
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
  proven_.erase(id);
}

void ConnectionGate::forget_stranger(uint64_t id) {
  auto found = strangers_.find(id);
  if (found == strangers_.end()) return;
  auto by_address = strangers_by_address_.find(found->second);
  by_address->second.erase(id);
  if (by_address->second.empty()) strangers_by_address_.erase(by_address);
  strangers_.erase(found);
}

}  // namespace cohort
