// ConnectionGate: the caps on connections that have not said hello, per address and in total,
// and on all connections.
#include <catch2/catch.hpp>

#include "rendezvous/connection_gate.hpp"

using namespace cohort;

TEST_CASE("strangers are capped per address, proving or closing frees the place",
          "[unit][rendezvous]") {
  ConnectionGate gate({2, 10, 100});
  CHECK(gate.admit("10.0.0.1").empty());
  CHECK(gate.admit("10.0.0.1").empty());
  std::string refusal = gate.admit("10.0.0.1");
  CHECK(refusal == "too many connections from 10.0.0.1 that have not said hello (2)");
  CHECK(gate.admit("10.0.0.2").empty());  // another address has its own share
  gate.proven("10.0.0.1");
  CHECK(gate.admit("10.0.0.1").empty());
  gate.closed("10.0.0.1", false);
  CHECK(gate.admit("10.0.0.1").empty());
  CHECK(gate.unproven() == 3);
  CHECK(gate.connections() == 4);
}

TEST_CASE("strangers are capped in total, and so are all connections", "[unit][rendezvous]") {
  ConnectionGate gate({5, 3, 4});
  for (const char* address : {"a", "b", "c"}) CHECK(gate.admit(address).empty());
  CHECK(gate.admit("d") == "too many connections that have not said hello (3)");
  gate.proven("a");
  CHECK(gate.admit("d").empty());
  CHECK(gate.admit("e") == "too many connections (4)");
  gate.closed("a", true);
  gate.closed("b", false);
  CHECK(gate.connections() == 2);
  CHECK(gate.admit("e").empty());
}
