// ConnectionGate: the caps on strangers (connections that have not proven themselves), per
// address and in total, and on all connections; the oldest overdue stranger makes room for a
// newcomer, which waits while only young strangers are in its way; waiting connections whose
// proof has all come (ready) start before the rest and are closed after them at the cap.
#include <catch2/catch.hpp>

#include "common/connection_gate.hpp"

#include <map>
#include <set>

using namespace cohort;
using namespace std::chrono_literals;

namespace {

const ConnectionGate::Time t0{};

std::vector<uint64_t> ids(uint64_t from, uint64_t to) {
  std::vector<uint64_t> all;
  for (uint64_t id = from; id <= to; ++id) all.push_back(id);
  return all;
}

}  // namespace

TEST_CASE("past the per-address cap, that address's oldest stranger makes room", "[unit][common]") {
  ConnectionGate gate({2, 10, 100});
  CHECK(gate.admit(1, "10.0.0.1", t0).evict.empty());
  CHECK(gate.admit(2, "10.0.0.2", t0).evict.empty());
  CHECK(gate.admit(3, "10.0.0.1", t0).evict.empty());
  Admission third = gate.admit(4, "10.0.0.1", t0);
  CHECK(third.refusal.empty());
  CHECK(third.start == std::vector<uint64_t>{4});  // no grace: a newcomer never waits
  CHECK(third.evict == std::vector<uint64_t>{1});  // not 2: another address has its own share
  CHECK(third.why == "the oldest of 2 connections from 10.0.0.1 that have not proven themselves");
  gate.closed(1);  // the evicted one's close changes nothing
  CHECK(gate.unproven() == 3);
  gate.proven(3);  // proven: no longer counted, never evicted
  CHECK(gate.admit(5, "10.0.0.1", t0).evict.empty());
  CHECK(gate.admit(6, "10.0.0.1", t0).evict == std::vector<uint64_t>{4});
  CHECK(gate.unproven() == 3);
  CHECK(gate.connections() == 4);
}

TEST_CASE("past the total cap on strangers, the oldest stranger anywhere makes room",
          "[unit][common]") {
  ConnectionGate gate({5, 3, 100});
  for (uint64_t id : {1, 2, 3}) CHECK(gate.admit(id, "s", t0).evict.empty());
  gate.proven(2);
  CHECK(gate.admit(4, "t", t0).evict.empty());
  Admission next = gate.admit(5, "u", t0);
  CHECK(next.refusal.empty());
  CHECK(next.evict == std::vector<uint64_t>{1});
  CHECK(gate.admit(6, "v", t0).evict == std::vector<uint64_t>{3});  // 2 is proven: skipped
  CHECK(gate.unproven() == 3);
  gate.closed(4);
  CHECK(gate.admit(7, "w", t0).evict.empty());
}

TEST_CASE("at the cap on all connections a stranger makes room, with none the newcomer is refused",
          "[unit][common]") {
  ConnectionGate gate({5, 5, 3});
  for (uint64_t id : {1, 2, 3}) CHECK(gate.admit(id, "a", t0).evict.empty());
  gate.proven(1);
  gate.proven(3);
  CHECK(gate.admit(4, "b", t0).evict == std::vector<uint64_t>{2});
  gate.proven(4);
  Admission full = gate.admit(5, "c", t0);
  CHECK(full.refusal == "too many connections (3)");
  CHECK(full.evict.empty());
  CHECK(gate.connections() == 3);
  gate.closed(3);
  CHECK(gate.admit(5, "c", t0).refusal.empty());
  CHECK(gate.connections() == 3);
}

TEST_CASE("a flood of strangers from many addresses never evicts a proven connection",
          "[unit][common]") {
  ConnectionGate gate({60, 1024, 16384});
  CHECK(gate.admit(0, "member", t0).evict.empty());
  gate.proven(0);
  uint64_t id = 1;
  size_t evicted = 0;
  for (int round = 0; round < 3; ++round) {
    for (int address = 0; address < 18; ++address) {
      for (int i = 0; i < 60; ++i) {
        Admission admission = gate.admit(id++, "127.0.0." + std::to_string(address + 2), t0);
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

TEST_CASE("with a grace 2000 newcomers from one address start 64 at a time and none is evicted",
          "[unit][common]") {
  ConnectionGate gate({64, 1024, 16384, 2000ms});
  std::vector<uint64_t> started;
  for (uint64_t id = 1; id <= 2000; ++id) {
    Admission admission = gate.admit(id, "10.0.0.1", t0);
    CHECK(admission.refusal.empty());
    CHECK(admission.evict.empty());
    started.insert(started.end(), admission.start.begin(), admission.start.end());
  }
  CHECK(started == ids(1, 64));  // the rest wait, unread, behind young strangers
  CHECK(gate.waiting() == 2000 - 64);
  CHECK(gate.next_pump(t0) == t0 + 2000ms);
  for (size_t next = 0; next < started.size(); ++next) {  // each proves itself within 10 ms
    gate.proven(started[next]);
    Admission admission = gate.pump(t0 + 10ms);
    CHECK(admission.evict.empty());
    started.insert(started.end(), admission.start.begin(), admission.start.end());
  }
  CHECK(started == ids(1, 2000));
  CHECK(gate.unproven() == 0);
  CHECK(gate.waiting() == 0);
  CHECK(gate.connections() == 2000);
}

TEST_CASE("a stranger silent past its grace makes room for a waiting newcomer from its address",
          "[unit][common]") {
  ConnectionGate gate({2, 10, 100, 1000ms});
  CHECK(gate.admit(1, "a", t0).start == std::vector<uint64_t>{1});
  CHECK(gate.admit(2, "a", t0 + 100ms).start == std::vector<uint64_t>{2});
  Admission third = gate.admit(3, "a", t0 + 500ms);
  CHECK(third.start.empty());
  CHECK(third.evict.empty());
  CHECK(third.refusal.empty());
  CHECK(gate.admit(4, "b", t0 + 500ms).start == std::vector<uint64_t>{4});  // its own share
  CHECK(gate.next_pump(t0 + 500ms) == t0 + 1000ms);
  CHECK(gate.pump(t0 + 999ms).start.empty());
  Admission later = gate.pump(t0 + 1000ms);
  CHECK(later.evict == std::vector<uint64_t>{1});
  CHECK(later.start == std::vector<uint64_t>{3});
  CHECK(later.why == "the oldest of 2 connections from a that have not proven themselves");
  CHECK_FALSE(gate.next_pump(t0 + 1000ms));  // nothing waits
  gate.closed(3);
  CHECK(gate.unproven() == 2);
}

TEST_CASE("past the total cap a newcomer waits for a stranger to prove itself or turn overdue",
          "[unit][common]") {
  ConnectionGate gate({5, 3, 100, 1000ms});
  CHECK(gate.admit(1, "m", t0).start == std::vector<uint64_t>{1});
  gate.proven(1);
  for (uint64_t id : {2, 3, 4}) CHECK(gate.admit(id, "s" + std::to_string(id), t0).evict.empty());
  CHECK(gate.admit(5, "x", t0 + 100ms).start.empty());
  gate.proven(3);
  CHECK(gate.pump(t0 + 200ms).start == std::vector<uint64_t>{5});
  CHECK(gate.admit(6, "y", t0 + 300ms).start.empty());
  CHECK(gate.next_pump(t0 + 300ms) == t0 + 1000ms);
  Admission later = gate.pump(t0 + 1000ms);
  CHECK(later.evict == std::vector<uint64_t>{2});
  CHECK(later.start == std::vector<uint64_t>{6});
  CHECK(later.why == "the oldest of 3 connections that have not proven themselves");
  CHECK(gate.unproven() == 3);
  CHECK(gate.connections() == 5);
}

TEST_CASE("at the cap on connections the oldest waiting one goes while every stranger is young",
          "[unit][common]") {
  ConnectionGate gate({1, 10, 3, 1000ms});
  CHECK(gate.admit(1, "a", t0).start == std::vector<uint64_t>{1});
  CHECK(gate.admit(2, "a", t0).start.empty());
  CHECK(gate.admit(3, "a", t0).start.empty());
  Admission fourth = gate.admit(4, "b", t0);
  CHECK(fourth.evict == std::vector<uint64_t>{2});
  CHECK(fourth.why == "the oldest connection waiting to be read, at 3 connections");
  CHECK(fourth.start == std::vector<uint64_t>{4});
  gate.proven(4);
  Admission fifth = gate.admit(5, "c", t0 + 1000ms);  // 1 is overdue now: it goes instead
  CHECK(fifth.evict == std::vector<uint64_t>{1});
  CHECK(fifth.start == std::vector<uint64_t>{3, 5});
  gate.proven(3);
  gate.proven(5);
  CHECK(gate.admit(6, "d", t0 + 5000ms).refusal == "too many connections (3)");
}

TEST_CASE("behind one address members all prove themselves while silent strangers come and go",
          "[unit][common]") {
  // Each millisecond 20 newcomers from one NAT'd address, members and silent strangers taking
  // turns; a member proves itself 5 ms after it started. Strangers hold at most the per-address
  // cap, and only strangers are evicted.
  ConnectionGate gate({64, 1024, 16384, 100ms});
  const uint64_t kEach = 2000;
  std::map<uint64_t, ConnectionGate::Time> members_started;
  std::set<uint64_t> proven;
  uint64_t next = 1;
  size_t strangers_evicted = 0;
  ConnectionGate::Time now = t0;
  auto apply = [&](const Admission& admission) {
    for (uint64_t id : admission.evict) {
      CHECK(id % 2 == 0);  // odd ids are members
      ++strangers_evicted;
    }
    for (uint64_t id : admission.start) {
      if (id % 2 == 1) members_started[id] = now;
    }
  };
  for (int tick = 0; tick < 60000 && proven.size() < kEach; ++tick, now += 1ms) {
    for (int i = 0; i < 20 && next <= 2 * kEach; ++i, ++next) apply(gate.admit(next, "nat", now));
    for (auto it = members_started.begin(); it != members_started.end();) {
      if (now - it->second < 5ms) {
        ++it;
        continue;
      }
      gate.proven(it->first);
      proven.insert(it->first);
      it = members_started.erase(it);
    }
    apply(gate.pump(now));
    REQUIRE(gate.unproven() <= 64);
  }
  CHECK(proven.size() == kEach);
  CHECK(strangers_evicted > kEach - 64);
}

TEST_CASE("a ready waiting connection starts before older ones that are not ready",
          "[unit][common]") {
  ConnectionGate gate({1, 10, 100, 1000ms});
  CHECK(gate.admit(1, "a", t0).start == std::vector<uint64_t>{1});
  for (uint64_t id : {2, 3, 4}) CHECK(gate.admit(id, "a", t0).start.empty());
  gate.ready(4);
  gate.ready(3);
  gate.ready(3);  // twice: no change
  gate.ready(1);  // not waiting: a no-op
  gate.ready(99);
  CHECK(gate.ready_waiting() == 2);
  gate.proven(1);
  CHECK(gate.pump(t0).start == std::vector<uint64_t>{3});  // the oldest ready one
  gate.proven(3);
  CHECK(gate.pump(t0).start == std::vector<uint64_t>{4});
  gate.proven(4);
  CHECK(gate.pump(t0).start == std::vector<uint64_t>{2});
  CHECK(gate.waiting() == 0);
  CHECK(gate.ready_waiting() == 0);
}

TEST_CASE("past the total cap a ready connection from any address starts first", "[unit][common]") {
  ConnectionGate gate({5, 1, 100, 1000ms});
  CHECK(gate.admit(1, "a", t0).start == std::vector<uint64_t>{1});
  CHECK(gate.admit(2, "b", t0).start.empty());
  CHECK(gate.admit(3, "c", t0).start.empty());
  gate.ready(3);
  Admission later = gate.pump(t0 + 1000ms);  // 1 is overdue: its place goes to 3, not 2
  CHECK(later.evict == std::vector<uint64_t>{1});
  CHECK(later.start == std::vector<uint64_t>{3});
  gate.proven(3);
  CHECK(gate.pump(t0 + 1000ms).start == std::vector<uint64_t>{2});
}

TEST_CASE("at the cap on connections the oldest waiting one not ready goes before ready ones",
          "[unit][common]") {
  ConnectionGate gate({1, 10, 4, 1000ms});
  CHECK(gate.admit(1, "a", t0).start == std::vector<uint64_t>{1});
  for (uint64_t id : {2, 3, 4}) CHECK(gate.admit(id, "a", t0).start.empty());
  gate.ready(2);
  Admission fifth = gate.admit(5, "a", t0);
  CHECK(fifth.evict == std::vector<uint64_t>{3});  // 2 is older, but ready
  CHECK(fifth.why == "the oldest connection waiting to be read, at 4 connections");
  gate.ready(4);
  gate.ready(5);
  Admission sixth = gate.admit(6, "a", t0);  // every waiting one is ready: the oldest goes
  CHECK(sixth.evict == std::vector<uint64_t>{2});
  CHECK(sixth.why ==
        "the oldest connection waiting to be read (all waiting ones are ready), at 4 connections");
  CHECK(gate.connections() == 4);
  CHECK(gate.ready_waiting() == 2);
}

TEST_CASE("under a flood of half-sent requests from one address each whole one starts in its grace",
          "[unit][common]") {
  // The HTTP server's limits. Every 25 ms a half-sent request from one address (never ready,
  // never proven); every 100 ms a whole one from the same address, ready 1 ms after it arrived
  // and proven when started. The keeper pumps after each change and at next_pump().
  ConnectionGate gate({8, 64, 256, 500ms});
  ConnectionGate::Time now = t0;
  std::map<uint64_t, ConnectionGate::Time> whole;  // waiting whole requests: since when
  std::vector<uint64_t> just_arrived;
  size_t answered = 0;
  std::chrono::milliseconds longest{0};
  auto apply = [&](const Admission& admission) {
    for (uint64_t id : admission.evict) CHECK(whole.count(id) == 0);
    for (uint64_t id : admission.start) {
      auto found = whole.find(id);
      if (found == whole.end()) continue;
      longest = std::max(
          longest, std::chrono::duration_cast<std::chrono::milliseconds>(now - found->second));
      whole.erase(found);
      gate.proven(id);
      gate.closed(id);  // answered
      ++answered;
    }
  };
  uint64_t next = 1;
  for (int ms = 0; ms < 30000; ++ms, now += 1ms) {
    for (uint64_t id : just_arrived) gate.ready(id);
    just_arrived.clear();
    if (ms % 100 == 0) {
      whole[next] = now;
      just_arrived.push_back(next);
      apply(gate.admit(next++, "a", now));
    }
    if (ms % 25 == 0) apply(gate.admit(next++, "a", now));
    for (Admission admission = gate.pump(now); !admission.start.empty(); admission = gate.pump(now))
      apply(admission);
    REQUIRE(gate.connections() <= 256);
    REQUIRE(gate.unproven() <= 8);
  }
  CHECK(answered + whole.size() == 300);
  CHECK(answered >= 295);
  CHECK(longest <= 501ms);
  for (const auto& [id, since] : whole) CHECK(now - since <= 501ms);
  CHECK(gate.connections() == 256);  // the flood fills the cap; only half-sent ones are closed
}
