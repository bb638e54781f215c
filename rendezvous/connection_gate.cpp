#include "rendezvous/connection_gate.hpp"

#include "common/text.hpp"

namespace cohort {

std::string ConnectionGate::admit(const std::string& address) {
  if (connections() >= limits_.max_connections) {
    return cat("too many connections (", limits_.max_connections, ")");
  }
  if (unproven_ >= limits_.max_unproven) {
    return cat("too many connections that have not said hello (", limits_.max_unproven, ")");
  }
  size_t& from_address = unproven_by_address_[address];
  if (from_address >= limits_.max_unproven_per_address) {
    return cat("too many connections from ", address, " that have not said hello (",
               limits_.max_unproven_per_address, ")");
  }
  ++from_address;
  ++unproven_;
  return {};
}

void ConnectionGate::proven(const std::string& address) {
  forget_unproven(address);
  ++proven_;
}

void ConnectionGate::closed(const std::string& address, bool was_proven) {
  if (!was_proven) return forget_unproven(address);
  if (proven_ > 0) --proven_;
}

void ConnectionGate::forget_unproven(const std::string& address) {
  auto found = unproven_by_address_.find(address);
  if (found == unproven_by_address_.end()) return;
  if (--found->second == 0) unproven_by_address_.erase(found);
  if (unproven_ > 0) --unproven_;
}

}  // namespace cohort
