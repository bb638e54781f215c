// The worker stores' use of a shared ByteBudget (--store-budget): growth, bytes held for
// requests and large replies taken from it, and given back.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/byte_budget.hpp"
#include "store/store.hpp"

using namespace cohort;

namespace {

constexpr uint64_t kOverhead = kStoreEntryOverheadBytes;

// One store of a process: applies requests, keeps the last outcome.
struct SharingStore {
  SharingStore(uint64_t quota, std::shared_ptr<ByteBudget> budget)
      : store(limits(quota), std::move(budget)) {}

  static StoreLimits limits(uint64_t quota) {
    StoreLimits limits;
    limits.quota_bytes = quota;
    return limits;
  }
  /// Applies `op` with one key and `values`, as StoreService::dispatch does for a client that
  /// reads its replies at once (nothing left to hold); true when the store took it.
  bool apply(StoreOp op, std::string key, std::vector<std::string> values = {}) {
    bool taken = apply_only(op, std::move(key), std::move(values));
    store.hold_reply(0);
    return taken;
  }
  /// The same, up to the moment the reply is made (before its session charges it).
  bool apply_only(StoreOp op, std::string key, std::vector<std::string> values = {}) {
    StoreRequest request{op, {std::move(key)}, std::move(values), 0};
    replies.clear();
    outcome = store.apply(1, request, replies);
    return !outcome.close_connection;
  }
  bool set(std::string key, size_t size) {
    return apply(StoreOp::Set, std::move(key), {std::string(size, 'v')});
  }

  Store store;
  StoreReplies replies;
  StoreOutcome outcome;
};

}  // namespace

TEST_CASE("store: stores sharing a budget stop at it, and one destroyed gives its share back",
          "[unit][store]") {
  auto budget = std::make_shared<ByteBudget>(10000);
  SharingStore first(8000, budget);
  auto second = std::make_unique<SharingStore>(8000, budget);
  CHECK(first.set("/a", 4000));
  CHECK(second->set("/b", 4000));
  CHECK(budget->used() == 2 * (2 + 4000 + kOverhead));
  // Each store is well under its quota of 8000; together they are near the budget.
  CHECK_FALSE(first.set("/c", 1800));
  CHECK(first.outcome.reason.find("SET would take the worker stores past their budget of 10000 "
                                  "bytes (--store-budget)") != std::string::npos);
  CHECK_FALSE(first.store.value("/c"));
  CHECK(first.store.used_bytes() == 2 + 4000 + kOverhead);
  CHECK_FALSE(first.apply(StoreOp::Append, "/a", {std::string(1800, 'a')}));
  CHECK_FALSE(first.apply(StoreOp::QueuePush, "/q", {std::string(1800, 'q')}));
  CHECK(first.set("/small", 10));  // what still fits goes through
  CHECK(first.set("/a", 10));      // a shrinking overwrite gives bytes back at once
  CHECK(budget->used() == (2 + 10 + kOverhead) + (6 + 10 + kOverhead) + (2 + 4000 + kOverhead));
  CHECK(first.set("/c", 3000));

  second.reset();  // its run ended: all it held goes back
  CHECK(budget->used() == first.store.used_bytes());
  CHECK(first.set("/d", 3000));
  CHECK_FALSE(first.set("/e", 3000));  // now the store's own quota refuses
  CHECK(first.outcome.reason.find("past its quota of 8000") != std::string::npos);
}

TEST_CASE("store: bytes held for requests and large replies count against the shared budget",
          "[unit][store]") {
  const uint64_t big = 2 * kStoreUnchargedReplyBytes;  // a GET reply its session would hold
  auto budget = std::make_shared<ByteBudget>(3 * big);
  SharingStore owner(8 * big, budget);
  SharingStore other(8 * big, budget);
  REQUIRE(owner.set("/v", big));
  // Bytes a request still arriving declares are taken from the budget, and given back.
  CHECK(other.store.charge_held(big).empty());
  CHECK(budget->used() == owner.store.used_bytes() + big);
  std::string refused = other.store.charge_held(big);
  CHECK(refused.find("past their budget of") != std::string::npos);
  CHECK(other.store.held_bytes() == big);
  other.store.release_held(big);
  CHECK(budget->used() == owner.store.used_bytes());
  // Replies made and not read are held; a large GET that does not fit in the room is refused.
  owner.store.hold(big);
  other.store.hold(big - 1000);
  CHECK(budget->used() == owner.store.used_bytes() + 2 * big - 1000);
  CHECK_FALSE(owner.apply(StoreOp::Get, "/v"));
  CHECK(owner.outcome.reason.find("GET reply of " + std::to_string(8 + big) +
                                  " bytes would take the worker stores past their budget") !=
        std::string::npos);
  owner.store.release_held(big);  // its client read them: room for the GET again
  CHECK(owner.apply(StoreOp::Get, "/v"));
  other.store.release_held(big - 1000);
  CHECK(budget->used() == owner.store.used_bytes());
}

TEST_CASE(
    "store: a large reply is taken from the budget as it is made, before its session holds it",
    "[unit][store]") {
  // Stores check the budget on different threads: a reply checked in one store must be in the
  // budget before another store checks its own.
  const uint64_t big = 2 * kStoreUnchargedReplyBytes;
  auto budget = std::make_shared<ByteBudget>(2 * big + 1000);
  SharingStore owner(8 * big, budget);
  SharingStore other(8 * big, budget);
  REQUIRE(owner.set("/v", big));
  const uint64_t stored = owner.store.used_bytes();
  REQUIRE(owner.apply_only(StoreOp::Get, "/v"));
  CHECK(budget->used() == stored + 8 + big);  // the reply, set aside
  std::string refused = other.store.charge_held(big);
  CHECK(refused.find("past their budget of") != std::string::npos);
  // Its session holds what its client has not read (here all but what it may leave uncharged).
  owner.store.hold_reply(8 + big - kStoreUnchargedReplyBytes);
  CHECK(budget->used() == stored + 8 + big - kStoreUnchargedReplyBytes);
  CHECK(owner.store.held_bytes() == 8 + big - kStoreUnchargedReplyBytes);
  owner.store.release_held(owner.store.held_bytes());  // read
  CHECK(budget->used() == stored);
  CHECK(other.store.charge_held(big).empty());
  // A reply refused leaves nothing set aside.
  REQUIRE_FALSE(owner.apply(StoreOp::Get, "/v"));
  CHECK(budget->used() == stored + big);
}
