// ConnectionGate: the caps on strangers (connections that have not proven themselves), per
// address and in total, and on all connections; the oldest stranger makes room for a newcomer.
#include <catch2/catch.hpp>

#include "common/connection_gate.hpp"

using namespace cohort;

TEST_CASE("past the per-address cap, that address's oldest stranger makes room", "[unit][common]") {
  ConnectionGate gate({2, 10, 100});
  CHECK(gate.admit(1, "10.0.0.1").evict.empty());
  CHECK(gate.admit(2, "10.0.0.2").evict.empty());
  CHECK(gate.admit(3, "10.0.0.1").evict.empty());
  Admission third = gate.admit(4, "10.0.0.1");
  CHECK(third.refusal.empty());
  CHECK(third.evict == std::vector<uint64_t>{1});  // not 2: another address has its own share
  CHECK(third.why == "the oldest of 2 connections from 10.0.0.1 that have not proven themselves");
  gate.closed(1);  // the evicted one's close changes nothing
  CHECK(gate.unproven() == 3);
  gate.proven(3);  // proven: no longer counted, never evicted
  CHECK(gate.admit(5, "10.0.0.1").evict.empty());
  CHECK(gate.admit(6, "10.0.0.1").evict == std::vector<uint64_t>{4});
  CHECK(gate.unproven() == 3);
  CHECK(gate.connections() == 4);
}

TEST_CASE("past the total cap on strangers, the oldest stranger anywhere makes room",
          "[unit][common]") {
  ConnectionGate gate({5, 3, 100});
  for (uint64_t id : {1, 2, 3}) CHECK(gate.admit(id, "s").evict.empty());
  gate.proven(2);
  CHECK(gate.admit(4, "t").evict.empty());
  Admission next = gate.admit(5, "u");
  CHECK(next.refusal.empty());
  CHECK(next.evict == std::vector<uint64_t>{1});
  CHECK(gate.admit(6, "v").evict == std::vector<uint64_t>{3});  // 2 is proven: skipped
  CHECK(gate.unproven() == 3);
  gate.closed(4);
  CHECK(gate.admit(7, "w").evict.empty());
}

TEST_CASE("at the cap on all connections a stranger makes room, with none the newcomer is refused",
          "[unit][common]") {
  ConnectionGate gate({5, 5, 3});
  for (uint64_t id : {1, 2, 3}) CHECK(gate.admit(id, "a").evict.empty());
  gate.proven(1);
  gate.proven(3);
  CHECK(gate.admit(4, "b").evict == std::vector<uint64_t>{2});
  gate.proven(4);
  Admission full = gate.admit(5, "c");
  CHECK(full.refusal == "too many connections (3)");
  CHECK(full.evict.empty());
  CHECK(gate.connections() == 3);
  gate.closed(3);
  CHECK(gate.admit(5, "c").refusal.empty());
  CHECK(gate.connections() == 3);
}

TEST_CASE("a flood of strangers from many addresses never evicts a proven connection",
          "[unit][common]") {
  ConnectionGate gate({60, 1024, 16384});
  CHECK(gate.admit(0, "member").evict.empty());
  gate.proven(0);
  uint64_t id = 1;
  size_t evicted = 0;
  for (int round = 0; round < 3; ++round) {
    for (int address = 0; address < 18; ++address) {
      for (int i = 0; i < 60; ++i) {
        Admission admission = gate.admit(id++, "127.0.0." + std::to_string(address + 2));
        CHECK(admission.refusal.empty());
        for (uint64_t gone : admission.evict) CHECK(gone != 0);
        evicted += admission.evict.size();
      }
    }
  }
  CHECK(evicted == 3 * 18 * 60 - 1024);
  CHECK(gate.unproven() == 1024);
  CHECK(gate.connections() == 1025);
}
