// GateKeeper: a ConnectionGate's decisions carried out through its owner's callbacks; waiting
// connections start when a stranger in their way proves itself, closes, or (its timer) turns
// overdue, ready ones before the rest, and nothing more starts once the keeper is closed.
#include <catch2/catch.hpp>

#include "common/gate_keeper.hpp"
#include "tests/support/fake_clock.hpp"

#include <algorithm>
#include <string>
#include <vector>

using namespace cohort;
using namespace std::chrono_literals;

namespace {

// A keeper on a fake clock that records what it was told to do.
struct Keeper {
  test::FakeClock clock;
  std::vector<uint64_t> started;
  std::vector<uint64_t> evicted;
  std::vector<std::string> why;
  std::function<void(uint64_t)> on_start;  ///< what a start does besides being recorded
  GateKeeper keeper;

  explicit Keeper(ConnectionLimits limits)
      : keeper(
            limits, clock,
            [this](uint64_t id, const std::string& reason) {
              evicted.push_back(id);
              why.push_back(reason);
            },
            [this](uint64_t id) {
              started.push_back(id);
              if (on_start) on_start(id);
            }) {}

  // What the owner does with a new connection: ask, then (unless refused) carry out.
  std::string arrive(uint64_t id, const std::string& address) {
    Admission admission = keeper.admit(id, address);
    if (admission.refusal.empty()) keeper.let_in(std::move(admission));
    return admission.refusal;
  }
};

}  // namespace

TEST_CASE("a waiting connection starts when the stranger in its way proves itself or closes",
          "[unit][common]") {
  Keeper k({1, 10, 100, 1000ms});
  CHECK(k.arrive(1, "a").empty());
  CHECK(k.arrive(2, "a").empty());
  CHECK(k.arrive(3, "a").empty());
  CHECK(k.started == std::vector<uint64_t>{1});  // 2 and 3 wait behind a young stranger
  CHECK(k.keeper.waiting() == 2);
  k.keeper.proven(1);
  CHECK(k.started == std::vector<uint64_t>{1, 2});
  k.keeper.closed(2);
  CHECK(k.started == std::vector<uint64_t>{1, 2, 3});
  CHECK(k.evicted.empty());
  CHECK(k.keeper.connections() == 2);  // 1 proven, 3 a stranger
  CHECK(k.clock.armed() == 0);         // nothing waits: no wake-up
}

TEST_CASE(
    "when the stranger in its way turns overdue the keeper wakes, evicts it and starts the "
    "newcomer",
    "[unit][common]") {
  Keeper k({1, 10, 100, 1000ms});
  k.arrive(1, "a");
  k.clock.advance(400ms);
  k.arrive(2, "a");
  CHECK(k.clock.armed() == 1);
  k.clock.advance(599ms);
  CHECK(k.started == std::vector<uint64_t>{1});
  k.clock.advance(1ms);
  CHECK(k.evicted == std::vector<uint64_t>{1});
  CHECK(k.why == std::vector<std::string>{
                     "the oldest of 1 connections from a that have not proven themselves"});
  CHECK(k.started == std::vector<uint64_t>{1, 2});
  k.keeper.closed(1);  // the evicted one's close changes nothing
  CHECK(k.keeper.connections() == 1);
  CHECK(k.clock.armed() == 0);
}

TEST_CASE("a connection that closes as it starts frees its place for the next in the same turn",
          "[unit][common]") {
  Keeper k({1, 10, 100, 1000ms});
  int depth = 0;
  int deepest = 0;
  k.on_start = [&](uint64_t id) {
    deepest = std::max(deepest, ++depth);
    if (id == 2 || id == 3) k.keeper.closed(id);  // as a peer gone while it waited
    --depth;
  };
  for (uint64_t id = 1; id <= 4; ++id) k.arrive(id, "a");
  CHECK(k.started == std::vector<uint64_t>{1});
  k.keeper.proven(1);
  CHECK(k.started == std::vector<uint64_t>{1, 2, 3, 4});  // each once, in order
  CHECK(deepest == 1);  // by the loop, not by starts nested in closes (thousands may wait)
  CHECK(k.keeper.waiting() == 0);
  CHECK(k.keeper.connections() == 2);
}

TEST_CASE("once closed a gate keeper starts nothing and evicts nothing", "[unit][common]") {
  Keeper k({1, 10, 100, 1000ms});
  k.arrive(1, "a");
  k.arrive(2, "a");
  CHECK(k.clock.armed() == 1);
  k.keeper.close();
  CHECK(k.clock.armed() == 0);
  k.clock.advance(5s);
  k.keeper.closed(1);
  CHECK(k.started == std::vector<uint64_t>{1});
  CHECK(k.evicted.empty());
  CHECK(k.keeper.connections() == 1);  // the gate still counts: 2 waits, unstarted
}

TEST_CASE("a ready waiting connection takes the first place that comes free", "[unit][common]") {
  Keeper k({1, 10, 100, 1000ms});
  for (uint64_t id : {1, 2, 3}) CHECK(k.arrive(id, "a").empty());
  k.keeper.ready(3);  // no room yet: it still waits
  CHECK(k.started == std::vector<uint64_t>{1});
  CHECK(k.keeper.ready_waiting() == 1);
  k.keeper.proven(1);
  CHECK(k.started == std::vector<uint64_t>{1, 3});
  k.keeper.closed(3);
  CHECK(k.started == std::vector<uint64_t>{1, 3, 2});
}
