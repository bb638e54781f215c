#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

#include "common/text.hpp"
#include "store/store.hpp"
#include "store/tcpstore_codec.hpp"
#include "tests/support/wire_bytes.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {

const std::string kStop = u8(0);      // STOP_WAITING
const std::string kCanceled = u8(1);  // WAIT_CANCELED

StoreRequest req(StoreOp op, std::vector<std::string> keys = {},
                 std::vector<std::string> values = {}, int64_t number = 0) {
  return StoreRequest{op, std::move(keys), std::move(values), number};
}

// Applies requests and keeps what came out, by connection.
struct Harness {
  explicit Harness(StoreLimits limits = {}) : store(limits) {}

  Store store;
  StoreOutcome outcome;
  StoreReplies replies;

  StoreReplies& run(StoreConnectionId connection, StoreRequest request) {
    replies.clear();
    outcome = store.apply(connection, request, replies);
    return replies;
  }
  /// The one reply to `connection`'s own request ("" when there was none); others ignored.
  std::string ask(StoreConnectionId connection, StoreRequest request) {
    run(connection, std::move(request));
    std::string own;
    size_t count = 0;
    for (auto& reply : replies) {
      if (reply.connection != connection) continue;
      own = reply.bytes;
      ++count;
    }
    CHECK(count <= 1);
    return own;
  }
  /// The connections released by the last request, in order.
  std::vector<StoreConnectionId> woken() const {
    std::vector<StoreConnectionId> ids;
    for (auto& reply : replies) {
      if (reply.bytes == kStop) ids.push_back(reply.connection);
    }
    return ids;
  }
  void set(StoreConnectionId connection, std::string key, std::string value) {
    CHECK(ask(connection, req(StoreOp::Set, {std::move(key)}, {std::move(value)})).empty());
  }
};

using Ids = std::vector<StoreConnectionId>;

}  // namespace

TEST_CASE("store: SET, GET and DELETE_KEY", "[unit][rendezvous][store]") {
  Harness h;
  h.set(1, "/k", "v1");
  CHECK(h.ask(2, req(StoreOp::Get, {"/k"})) == bytes("v1"));
  h.set(1, "/k", std::string("\0x", 2));
  CHECK(h.ask(2, req(StoreOp::Get, {"/k"})) == bytes(std::string("\0x", 2)));
  CHECK(h.ask(2, req(StoreOp::Get, {"/missing"})) == bytes(""));  // empty reply, no close
  CHECK_FALSE(h.outcome.close_connection);
  CHECK(h.ask(1, req(StoreOp::DeleteKey, {"/k"})) == i64(1));
  CHECK(h.ask(1, req(StoreOp::DeleteKey, {"/k"})) == i64(0));
  CHECK_FALSE(h.store.value("/k").has_value());
}

TEST_CASE("store: ADD follows strtoll and closes on a non-number", "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(1, req(StoreOp::Add, {"/cnt"}, {}, 5)) == i64(5));  // absent: value = delta
  CHECK(h.store.value("/cnt") == "5");
  CHECK(h.ask(1, req(StoreOp::Add, {"/cnt"}, {}, -7)) == i64(-2));
  CHECK(h.store.value("/cnt") == "-2");
  CHECK(h.ask(1, req(StoreOp::Add, {"/zero"}, {}, 0)) == i64(0));  // add 0 creates "0"
  CHECK(h.store.value("/zero") == "0");

  struct Case {
    std::string stored;
    int64_t delta;
    int64_t result;
  };
  for (const auto& each :
       std::vector<Case>{{"12x", 1, 13},
                         {" \t\n-7", 1, -6},
                         {"+3", 1, 4},
                         {"007", 0, 7},
                         {"0x10", 1, 1},
                         {"5 6", 1, 6},
                         {std::string("4\0"
                                      "9",
                                      3),
                          1, 5},
                         {"-9223372036854775808", 0, std::numeric_limits<int64_t>::min()},
                         {"9223372036854775807", 0, std::numeric_limits<int64_t>::max()}}) {
    INFO(each.stored);
    h.set(1, "/c", each.stored);
    CHECK(h.ask(1, req(StoreOp::Add, {"/c"}, {}, each.delta)) == i64(each.result));
    CHECK_FALSE(h.outcome.close_connection);
  }
  for (std::string bad : {"abc", "", " ", "-", "+x", "9223372036854775808", "-9223372036854775809",
                          "99999999999999999999"}) {
    INFO("'" << bad << "'");
    h.set(1, "/bad", bad);
    CHECK(h.ask(1, req(StoreOp::Add, {"/bad"}, {}, 1)).empty());
    CHECK(h.outcome.close_connection);
    CHECK(h.store.value("/bad") == bad);  // unchanged
  }
  h.set(1, "/max", "9223372036854775807");
  h.ask(1, req(StoreOp::Add, {"/max"}, {}, 1));
  CHECK(h.outcome.close_connection);
  CHECK(h.store.value("/max") == "9223372036854775807");
  // The refusal, which the daemon logs, shows a client's key short and on one line.
  std::string forged = "/k\ncohort error: forged line\r\n" + std::string(100000, 'x');
  h.set(1, forged, "abc");
  h.ask(1, req(StoreOp::Add, {forged}, {}, 1));
  CHECK(h.outcome.close_connection);
  CHECK(h.outcome.reason.find('\n') == std::string::npos);
  CHECK(h.outcome.reason.find("/k\\ncohort error: forged line\\r\\n") != std::string::npos);
  CHECK(h.outcome.reason.size() < 400);
}

TEST_CASE("store: the counter parser", "[unit][rendezvous][store]") {
  CHECK(parse_store_counter("42") == 42);
  CHECK(parse_store_counter("\v\f\r 42abc") == 42);
  CHECK(parse_store_counter("-0") == 0);
  CHECK_FALSE(parse_store_counter("").has_value());
  CHECK_FALSE(parse_store_counter("- 1").has_value());
  CHECK_FALSE(parse_store_counter("++1").has_value());
}

TEST_CASE("store: COMPARE_SET's four cases", "[unit][rendezvous][store]") {
  Harness h;
  SECTION("absent key, empty expected: stores and returns desired") {
    CHECK(h.ask(1, req(StoreOp::CompareSet, {"/k"}, {"", "new"})) == bytes("new"));
    CHECK(h.store.value("/k") == "new");
  }
  SECTION("absent key, non-empty expected: returns expected, stores nothing") {
    CHECK(h.ask(1, req(StoreOp::CompareSet, {"/k"}, {"Y2FuaW1hZGFt", "state"})) ==
          bytes("Y2FuaW1hZGFt"));
    CHECK_FALSE(h.store.value("/k").has_value());
  }
  SECTION("present and equal: swaps and returns desired") {
    h.set(1, "/k", "old");
    CHECK(h.ask(1, req(StoreOp::CompareSet, {"/k"}, {"old", "new"})) == bytes("new"));
    CHECK(h.store.value("/k") == "new");
  }
  SECTION("present and different: returns the current value unchanged") {
    h.set(1, "/k", "current");
    CHECK(h.ask(1, req(StoreOp::CompareSet, {"/k"}, {"old", "new"})) == bytes("current"));
    CHECK(h.store.value("/k") == "current");
    CHECK(h.ask(1, req(StoreOp::CompareSet, {"/k"}, {"", "new"})) == bytes("current"));
  }
  SECTION("a present empty value matches an empty expected") {
    h.set(1, "/k", "");
    CHECK(h.ask(1, req(StoreOp::CompareSet, {"/k"}, {"", "new"})) == bytes("new"));
    CHECK(h.store.value("/k") == "new");
  }
  SECTION("byte-exact comparison") {
    h.set(1, "/k", std::string("a\0", 2));
    CHECK(h.ask(1, req(StoreOp::CompareSet, {"/k"}, {"a", "new"})) == bytes(std::string("a\0", 2)));
  }
}

TEST_CASE("store: CHECK never blocks", "[unit][rendezvous][store]") {
  Harness h;
  h.set(1, "/a", "1");
  CHECK(h.ask(1, req(StoreOp::Check, {"/a"})) == u8(0));
  CHECK(h.ask(1, req(StoreOp::Check, {"/a", "/b"})) == u8(1));
  CHECK(h.ask(1, req(StoreOp::Check, {})) == u8(0));
  CHECK_FALSE(h.store.is_waiting(1));
  h.ask(1, req(StoreOp::QueuePush, {"/q"}, {"x"}));
  CHECK(h.ask(1, req(StoreOp::Check, {"/q"})) == u8(0));  // a non-empty queue counts
}

TEST_CASE("store: WAIT answers at once or when every key exists", "[unit][rendezvous][store]") {
  Harness h;
  h.set(1, "/a", "1");
  CHECK(h.ask(2, req(StoreOp::Wait, {"/a"})) == kStop);
  CHECK(h.ask(2, req(StoreOp::Wait, {})) == kStop);

  CHECK(h.ask(2, req(StoreOp::Wait, {"/a", "/b", "/c"})).empty());
  CHECK(h.store.is_waiting(2));
  h.set(1, "/b", "1");
  CHECK(h.woken().empty());
  h.set(1, "/c", "1");
  CHECK(h.woken() == Ids{2});
  CHECK_FALSE(h.store.is_waiting(2));
  h.set(1, "/c", "2");  // no second reply
  CHECK(h.woken().empty());
}

TEST_CASE("store: every write that creates or updates a key wakes", "[unit][rendezvous][store]") {
  Harness h;
  auto wait_then = [&](StoreRequest write) {
    h.run(9, req(StoreOp::DeleteKey, {"/k"}));
    CHECK(h.ask(2, req(StoreOp::Wait, {"/k"})).empty());
    h.run(1, std::move(write));
    return h.woken();
  };
  CHECK(wait_then(req(StoreOp::Set, {"/k"}, {"v"})) == Ids{2});
  CHECK(wait_then(req(StoreOp::Add, {"/k"}, {}, 1)) == Ids{2});
  CHECK(wait_then(req(StoreOp::Append, {"/k"}, {"x"})) == Ids{2});
  CHECK(wait_then(req(StoreOp::MultiSet, {"/other", "/k"}, {"1", "2"})) == Ids{2});
  CHECK(wait_then(req(StoreOp::CompareSet, {"/k"}, {"", "v"})) == Ids{2});
  // compare_set that leaves the key absent wakes nobody.
  CHECK(wait_then(req(StoreOp::CompareSet, {"/k"}, {"expected", "v"})).empty());
  CHECK(h.store.is_waiting(2));
  // Nor does DELETE_KEY, a queue push of another name, or a read.
  h.run(1, req(StoreOp::DeleteKey, {"/k"}));
  h.run(1, req(StoreOp::Get, {"/k"}));
  CHECK(h.woken().empty());
  CHECK(h.store.is_waiting(2));
}

TEST_CASE("store: a present key updated by COMPARE_SET wakes nothing stale",
          "[unit][rendezvous][store]") {
  Harness h;
  h.set(1, "/k", "old");
  CHECK(h.ask(2, req(StoreOp::Wait, {"/k", "/other"})).empty());
  h.run(1, req(StoreOp::CompareSet, {"/k"}, {"old", "new"}));
  CHECK(h.woken().empty());
  h.set(1, "/other", "x");
  CHECK(h.woken() == Ids{2});
}

TEST_CASE("store: waits of several connections and duplicate keys", "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(2, req(StoreOp::Wait, {"/k"})).empty());
  CHECK(h.ask(3, req(StoreOp::Wait, {"/k", "/k"})).empty());  // counted twice
  CHECK(h.ask(4, req(StoreOp::Wait, {"/k", "/j"})).empty());
  CHECK(h.store.waiting_connections() == 3);
  h.set(1, "/k", "v");
  CHECK(h.woken() == Ids{2, 3});  // 3 once, although it registered twice
  CHECK(h.replies.size() == 2);
  CHECK(h.store.is_waiting(4));
  h.set(1, "/j", "v");
  CHECK(h.woken() == Ids{4});
  CHECK(h.store.waiting_connections() == 0);
}

TEST_CASE("store: DELETE_KEY does not un-count a wait", "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(2, req(StoreOp::Wait, {"/a", "/b"})).empty());
  h.set(1, "/a", "1");
  h.run(1, req(StoreOp::DeleteKey, {"/a"}));
  h.set(1, "/b", "1");
  CHECK(h.woken() == Ids{2});
}

TEST_CASE("store: a disconnect drops the registrations", "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(2, req(StoreOp::Wait, {"/k"})).empty());
  CHECK(h.ask(3, req(StoreOp::Wait, {"/k"})).empty());
  h.store.disconnect(2);
  h.store.disconnect(7);  // unknown: nothing
  CHECK_FALSE(h.store.is_waiting(2));
  h.set(1, "/k", "v");
  CHECK(h.woken() == Ids{3});
}

TEST_CASE("store: a new request from a waiting connection drops its wait (1.13 timeout)",
          "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(2, req(StoreOp::Wait, {"/late"})).empty());
  // The 1.13 client timed out and goes on with a GET: its answer comes, and no stray 0 later.
  CHECK(h.ask(2, req(StoreOp::Get, {"/other"})) == bytes(""));
  CHECK_FALSE(h.store.is_waiting(2));
  h.set(1, "/late", "v");
  CHECK(h.replies.empty());
  // A SET of the awaited key by the timed-out connection itself answers nothing either.
  CHECK(h.ask(3, req(StoreOp::Wait, {"/x"})).empty());
  h.run(3, req(StoreOp::Set, {"/x"}, {"v"}));
  CHECK(h.replies.empty());
}

TEST_CASE("store: a wait given up leaves nothing that counts down the next wait",
          "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(2, req(StoreOp::Wait, {"/k"})).empty());
  CHECK(h.ask(2, req(StoreOp::Get, {"/other"})) == bytes(""));  // gives the wait up
  CHECK(h.ask(2, req(StoreOp::Wait, {"/k", "/j"})).empty());
  h.set(1, "/k", "v");  // counts down only the new wait's /k, not the old one's too
  CHECK(h.replies.empty());
  CHECK(h.store.is_waiting(2));
  h.set(1, "/j", "v");
  CHECK(h.woken() == Ids{2});
  // A push counts down the live registrations in order, skipping the given-up ones.
  CHECK(h.ask(3, req(StoreOp::Wait, {"q"})).empty());
  h.store.disconnect(3);
  CHECK(h.ask(4, req(StoreOp::Wait, {"q"})).empty());
  h.run(1, req(StoreOp::QueuePush, {"q"}, {"a"}));
  CHECK(h.woken() == Ids{4});
}

TEST_CASE("store: waits given up by the thousand are swept out, and live ones still answered",
          "[unit][store]") {
  Harness h;
  CHECK(h.ask(1, req(StoreOp::Wait, {"/live"})).empty());
  std::vector<std::string> same_key(20000, "/never");  // one key, named 20,000 times
  for (StoreConnectionId connection = 10; connection < 60; ++connection) {
    CHECK(h.ask(connection, req(StoreOp::Wait, same_key)).empty());
    if (connection % 2 == 0) {
      h.store.disconnect(connection);  // half close, half go on
    } else {
      CHECK(h.ask(connection, req(StoreOp::GetNumKeys)) == i64(0));
    }
    // Never more stale entries than live ones, beyond a few thousand.
    CHECK(h.store.registration_entries() <= 1 + 4096);
  }
  CHECK(h.store.waiting_connections() == 1);
  CHECK(h.store.used_bytes() == 5 + kStoreEntryOverheadBytes);  // only /live's registration
  h.set(2, "/never", "v");
  CHECK(h.replies.empty());
  h.set(2, "/live", "v");
  CHECK(h.woken() == Ids{1});
  CHECK(h.store.registration_entries() == 0);
}

TEST_CASE("store: waits given up on long keys are swept out by their bytes, not only their count",
          "[unit][store]") {
  Harness h;
  // 8,192 live registrations on a 1-byte key: more than the stale entries ever grow to below.
  CHECK(h.ask(1, req(StoreOp::Wait, std::vector<std::string>(8192, "a"))).empty());
  const uint64_t live_bytes = h.store.registration_bytes();
  CHECK(live_bytes == 8192 * (1 + kStoreEntryOverheadBytes));
  // Another connection gives up waits on 4 KiB keys, 100 at a time: 17 MB of stale entries that
  // the quota no longer counts, were they kept.
  uint64_t most_stale_bytes = 0;
  for (int round = 0; round < 40; ++round) {
    std::vector<std::string> long_keys;
    for (int i = 0; i < 100; ++i) {
      long_keys.push_back(cohort::cat(round, "/", i, std::string(4096, 'k')));
    }
    CHECK(h.ask(2, req(StoreOp::Wait, long_keys)).empty());
    CHECK(h.ask(2, req(StoreOp::GetNumKeys)) == i64(0));
    most_stale_bytes = std::max(most_stale_bytes, h.store.registration_bytes() - live_bytes);
  }
  CHECK(most_stale_bytes <= live_bytes);  // never more than the live ones take
  CHECK(h.store.used_bytes() == live_bytes);
  h.set(3, "a", "v");
  CHECK(h.woken() == Ids{1});
  CHECK(h.store.used_bytes() == 1 + 1 + kStoreEntryOverheadBytes);  // only "a" = "v"
}

TEST_CASE("store: CANCEL_WAIT always answers 1", "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(2, req(StoreOp::CancelWait)) == kCanceled);  // nothing pending
  CHECK(h.ask(2, req(StoreOp::Wait, {"/k"})).empty());
  CHECK(h.ask(2, req(StoreOp::CancelWait)) == kCanceled);
  h.set(1, "/k", "v");
  CHECK(h.replies.empty());
  // The wake raced ahead: the client got 0, and still gets 1 for its CANCEL_WAIT.
  CHECK(h.ask(2, req(StoreOp::Wait, {"/j"})).empty());
  h.set(1, "/j", "v");
  CHECK(h.woken() == Ids{2});
  CHECK(h.ask(2, req(StoreOp::CancelWait)) == kCanceled);
}

TEST_CASE("store: GETNUMKEYS, LIST_KEYS, MULTI_GET, MULTI_SET, APPEND",
          "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(1, req(StoreOp::GetNumKeys)) == i64(0));
  CHECK(h.ask(1, req(StoreOp::Add, {"init/"}, {}, 1)) == i64(1));
  h.run(1, req(StoreOp::MultiSet, {"/b", "/a"}, {"2", "1"}));
  CHECK(h.replies.empty());
  h.run(1, req(StoreOp::QueuePush, {"/q"}, {"x"}));
  CHECK(h.ask(1, req(StoreOp::GetNumKeys)) == i64(3));  // queues are not keys
  std::string keys = h.ask(1, req(StoreOp::ListKeys));  // in no particular order
  CHECK(keys.size() == 8 + (8 + 2) + (8 + 2) + (8 + 5));
  CHECK(keys.substr(0, 8) == i64(3));
  for (const char* key : {"/a", "/b", "init/"}) CHECK(keys.find(bytes(key)) != std::string::npos);
  CHECK(h.ask(1, req(StoreOp::MultiGet, {"/b", "/none", "/a"})) ==
        bytes("2") + bytes("") + bytes("1"));
  CHECK(h.ask(1, req(StoreOp::MultiGet, {})).empty());
  h.run(1, req(StoreOp::Append, {"/a"}, {"+more"}));
  h.run(1, req(StoreOp::Append, {"/new"}, {"first"}));
  CHECK(h.store.value("/a") == "1+more");
  CHECK(h.store.value("/new") == "first");
}

TEST_CASE("store: a MULTI_GET reply over the limit closes the connection",
          "[unit][rendezvous][store]") {
  Harness h;
  h.set(1, "/v", std::string(4096, 'v'));
  std::vector<std::string> keys(70000, "/v");  // 280 MiB of reply from a few hundred KiB
  CHECK(h.ask(1, req(StoreOp::MultiGet, keys)).empty());
  CHECK(h.outcome.close_connection);
  keys.resize(1000);
  CHECK(h.ask(1, req(StoreOp::MultiGet, keys)).size() == 1000 * (8 + 4096));
  CHECK_FALSE(h.outcome.close_connection);
}

TEST_CASE("store: WATCH_KEY is registered and never notified", "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(5, req(StoreOp::WatchKey, {"/k"})) == u8(3));
  h.set(1, "/k", "v");
  h.run(1, req(StoreOp::DeleteKey, {"/k"}));
  CHECK(h.replies.size() == 1);  // only DELETE_KEY's own answer
  CHECK(h.replies[0].connection == 1);
}

TEST_CASE("store: PING echoes, VALIDATE is silent", "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(1, req(StoreOp::Validate, {}, {}, kStoreValidateMagic)).empty());
  std::string echo;
  append_u32(echo, 0xDEADBEEF);
  CHECK(h.ask(1, req(StoreOp::Ping, {}, {}, 0xDEADBEEF)) == echo);
}

TEST_CASE("store: queues", "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(1, req(StoreOp::QueueLen, {"q"})) == i64(0));
  CHECK(h.ask(1, req(StoreOp::QueuePop, {"q"})) == i64(0));  // empty: length only
  // Two blocking pops wait; one push wakes exactly one of them.
  CHECK(h.ask(2, req(StoreOp::Wait, {"q"})).empty());
  CHECK(h.ask(3, req(StoreOp::Wait, {"q"})).empty());
  h.run(1, req(StoreOp::QueuePush, {"q"}, {"first"}));
  CHECK(h.woken() == Ids{2});
  CHECK(h.store.is_waiting(3));
  h.run(1, req(StoreOp::QueuePush, {"q"}, {"second"}));
  CHECK(h.woken() == Ids{3});
  CHECK(h.ask(1, req(StoreOp::QueueLen, {"q"})) == i64(2));
  CHECK(h.ask(4, req(StoreOp::Wait, {"q"})) == kStop);  // non-empty queue is present
  CHECK(h.ask(2, req(StoreOp::QueuePop, {"q"})) == i64(2) + bytes("first"));
  CHECK(h.ask(3, req(StoreOp::QueuePop, {"q"})) == i64(1) + bytes("second"));
  CHECK(h.ask(3, req(StoreOp::QueuePop, {"q"})) == i64(0));
  CHECK(h.store.queue_length("q") == 0);
  // A queue and a key of the same name are separate.
  h.set(1, "q", "value");
  CHECK(h.ask(1, req(StoreOp::QueueLen, {"q"})) == i64(0));
}

TEST_CASE("store: a push counts registrations down in order until one waiter is released",
          "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(2, req(StoreOp::Wait, {"q", "/k"})).empty());
  CHECK(h.ask(3, req(StoreOp::Wait, {"q", "q"})).empty());
  CHECK(h.ask(4, req(StoreOp::Wait, {"q"})).empty());
  h.run(1, req(StoreOp::QueuePush, {"q"}, {"a"}));
  CHECK(h.woken() == Ids{3});  // 2 counted down (still waits for /k), 3 released, 4 untouched
  h.run(1, req(StoreOp::QueuePush, {"q"}, {"b"}));
  CHECK(h.woken() == Ids{4});
  h.set(1, "/k", "v");
  CHECK(h.woken() == Ids{2});
}

TEST_CASE("store: BARRIER", "[unit][rendezvous][store]") {
  Harness h;
  CHECK(h.ask(1, req(StoreOp::Barrier, {"/bar"}, {}, 3)).empty());
  CHECK(h.ask(2, req(StoreOp::Barrier, {"/bar"}, {}, 3)).empty());
  CHECK(h.store.value("/bar") == "2");
  CHECK(h.ask(3, req(StoreOp::Barrier, {"/bar"}, {}, 3)) == kStop);
  Ids woken = h.woken();
  std::sort(woken.begin(), woken.end());
  CHECK(woken == Ids{1, 2, 3});
  CHECK(h.store.value("/bar") == "3");
  CHECK(h.store.waiting_connections() == 0);
  // A late arrival passes at once; a cancelled one answers 1 and is not woken.
  CHECK(h.ask(4, req(StoreOp::Barrier, {"/bar"}, {}, 3)) == kStop);
  CHECK(h.ask(5, req(StoreOp::Barrier, {"/b2"}, {}, 2)).empty());
  CHECK(h.ask(5, req(StoreOp::CancelWait)) == kCanceled);
  CHECK(h.ask(6, req(StoreOp::Barrier, {"/b2"}, {}, 2)) == kStop);
  CHECK(h.woken() == Ids{6});
  // A non-counter key closes the connection.
  h.set(1, "/text", "abc");
  h.ask(7, req(StoreOp::Barrier, {"/text"}, {}, 2));
  CHECK(h.outcome.close_connection);
}

TEST_CASE("store: malformed hand-built requests are refused", "[unit][rendezvous][store]") {
  Harness h;
  h.run(1, req(StoreOp::Set, {"/k"}, {}));
  CHECK(h.outcome.close_connection);
  h.run(1, req(StoreOp::CompareSet, {"/k"}, {"only expected"}));
  CHECK(h.outcome.close_connection);
  h.run(1, req(StoreOp::MultiSet, {"/a", "/b"}, {"1"}));
  CHECK(h.outcome.close_connection);
  h.run(1, req(StoreOp::Get, {}));
  CHECK(h.outcome.close_connection);
  CHECK(h.store.num_keys() == 0);
}

namespace {

// The quota tests' limits: small enough to reach with a few requests.
StoreLimits small_limits() {
  StoreLimits limits;
  limits.quota_bytes = 4096;
  limits.max_value_bytes = 1024;
  limits.max_request_bytes = 2048;
  limits.max_reply_bytes = 1024;
  return limits;
}

}  // namespace

TEST_CASE("store: the quota counts keys, values and queue items, and frees them", "[unit][store]") {
  Harness h(small_limits());
  const uint64_t k = kStoreEntryOverheadBytes;
  h.set(1, "/a", "12345");
  CHECK(h.store.used_bytes() == 2 + 5 + k);
  h.set(1, "/a", "1");  // overwrite: only the value changes
  CHECK(h.store.used_bytes() == 2 + 1 + k);
  h.run(1, req(StoreOp::Append, {"/a"}, {"234"}));
  h.run(1, req(StoreOp::Append, {"/b"}, {"xy"}));
  CHECK(h.store.used_bytes() == (2 + 4 + k) + (2 + 2 + k));
  h.ask(1, req(StoreOp::Add, {"/n"}, {}, 10));
  h.ask(1, req(StoreOp::CompareSet, {"/c"}, {"", "new"}));
  h.run(1, req(StoreOp::MultiSet, {"/d", "/e"}, {"1", "22"}));
  h.ask(1, req(StoreOp::Barrier, {"/bar"}, {}, 1));
  h.run(1, req(StoreOp::QueuePush, {"/q"}, {"item"}));
  h.run(1, req(StoreOp::QueuePush, {"/q"}, {"it"}));
  CHECK(h.store.used_bytes() == (2 + 4 + k) + (2 + 2 + k) + (2 + 2 + k) + (2 + 3 + k) +
                                    (2 + 1 + k) + (2 + 2 + k) + (4 + 1 + k) + (2 + k) + (4 + k) +
                                    (2 + k));
  for (const char* key : {"/a", "/b", "/n", "/c", "/d", "/e", "/bar"}) {
    CHECK(h.ask(1, req(StoreOp::DeleteKey, {key})) == i64(1));
  }
  h.ask(1, req(StoreOp::QueuePop, {"/q"}));
  h.ask(1, req(StoreOp::QueuePop, {"/q"}));
  CHECK(h.store.used_bytes() == 0);
  CHECK_FALSE(h.outcome.close_connection);
}

TEST_CASE("store: a write past the quota is refused and the other keys stay", "[unit][store]") {
  Harness h(small_limits());
  int stored = 0;
  for (; stored < 1000; ++stored) {  // a flood of small keys ends at the quota
    h.run(1, req(StoreOp::Set, {"/k" + std::to_string(stored)}, {"v"}));
    if (h.outcome.close_connection) break;
  }
  CHECK(h.outcome.close_connection);
  CHECK(h.outcome.reason.find("quota of 4096") != std::string::npos);
  CHECK(stored > 25);
  CHECK(stored < 35);  // 4096 / (128 + 5 or 6 bytes)
  CHECK(h.store.num_keys() == static_cast<size_t>(stored));
  CHECK(h.store.used_bytes() <= 4096);
  CHECK(h.store.value("/k0") == "v");

  for (auto request : {req(StoreOp::Set, {"/big"}, {std::string(1000, 'b')}),
                       req(StoreOp::Append, {"/k0"}, {std::string(1000, 'b')}),
                       req(StoreOp::QueuePush, {"/q"}, {std::string(1000, 'b')}),
                       req(StoreOp::MultiSet, {"/x", "/y"}, {std::string(600, 'x'), "y"})}) {
    INFO(op_name(request.op));
    h.run(2, request);
    CHECK(h.outcome.close_connection);
  }
  CHECK(h.store.value("/k0") == "v");
  CHECK_FALSE(h.store.value("/big"));
  CHECK_FALSE(h.store.value("/y"));  // a refused MULTI_SET stores none of its pairs
  CHECK(h.store.queue_length("/q") == 0);
  // Reads, overwrites that do not grow, and deletes still work; a delete makes room.
  CHECK(h.ask(2, req(StoreOp::Get, {"/k1"})) == bytes("v"));
  h.set(2, "/k1", "w");
  CHECK(h.ask(2, req(StoreOp::DeleteKey, {"/k1"})) == i64(1));
  CHECK(h.ask(2, req(StoreOp::DeleteKey, {"/k2"})) == i64(1));
  h.set(2, "/new", "v");
  CHECK_FALSE(h.outcome.close_connection);
}

TEST_CASE("store: APPEND and MULTI_SET keep to the value and request limits", "[unit][store]") {
  Harness h(small_limits());
  h.run(1, req(StoreOp::Append, {"/a"}, {std::string(1000, 'a')}));
  CHECK_FALSE(h.outcome.close_connection);
  h.run(1, req(StoreOp::Append, {"/a"}, {std::string(25, 'a')}));  // 1025 after the append
  CHECK(h.outcome.close_connection);
  CHECK(h.outcome.reason.find("value of 1025 bytes, past the limit of 1024") != std::string::npos);
  CHECK(h.store.value("/a")->size() == 1000);
  h.run(1, req(StoreOp::Append, {"/a"}, {std::string(24, 'a')}));  // exactly at the limit
  CHECK_FALSE(h.outcome.close_connection);

  h.run(1, req(StoreOp::MultiSet, {"/x", "/y"}, {"x", std::string(1025, 'y')}));
  CHECK(h.outcome.close_connection);
  h.run(1, req(StoreOp::MultiSet, {"/x", "/y", "/z"},
               {std::string(1000, 'x'), std::string(1000, 'y'), std::string(100, 'z')}));
  CHECK(h.outcome.close_connection);  // 2106 bytes as a whole
  CHECK(h.outcome.reason.find("past the limit of 2048") != std::string::npos);
  CHECK(h.store.num_keys() == 1);
  h.run(1, req(StoreOp::Set, {"/s"}, {std::string(1025, 's')}));
  CHECK(h.outcome.close_connection);
  h.run(1, req(StoreOp::CompareSet, {"/s"}, {"", std::string(1025, 's')}));
  CHECK(h.outcome.close_connection);
  CHECK(h.store.num_keys() == 1);
}

TEST_CASE("store: GET, MULTI_GET and LIST_KEYS replies keep to the reply limit", "[unit][store]") {
  StoreLimits limits = small_limits();
  limits.max_reply_bytes = 100;
  Harness h(limits);
  h.set(1, "/v", std::string(92, 'v'));  // GET reply: 8 + 92 = 100
  CHECK(h.ask(1, req(StoreOp::Get, {"/v"})) == bytes(std::string(92, 'v')));
  h.run(1, req(StoreOp::Append, {"/v"}, {"!"}));
  CHECK(h.ask(1, req(StoreOp::Get, {"/v"})).empty());
  CHECK(h.outcome.close_connection);
  CHECK(h.outcome.reason.find("reply of 101 bytes, past the limit of 100") != std::string::npos);
  CHECK(h.ask(1, req(StoreOp::MultiGet, {"/v"})).empty());
  CHECK(h.outcome.close_connection);
  for (int i = 0; i < 10; ++i) h.set(1, "/key" + std::to_string(i), "");
  CHECK(h.ask(1, req(StoreOp::ListKeys)).empty());  // 8 + 2 * 8 + ... > 100
  CHECK(h.outcome.close_connection);
  CHECK(h.store.num_keys() == 11);
}

TEST_CASE("store: a large COMPARE_SET reply must fit in the quota's room, as a GET's must",
          "[unit][store]") {
  const uint64_t kib = 1024;
  StoreLimits limits;
  limits.quota_bytes = 520 * kib;
  Harness h(limits);
  const std::string value(200 * kib, 'v');
  h.set(1, "/v", value);
  h.store.hold(150 * kib);  // replies a connection has not read: 350 KiB of 520 taken
  // A mismatch answers the current value: 200 KiB more to hold, past the quota.
  CHECK(h.ask(1, req(StoreOp::CompareSet, {"/v"}, {"other", "new"})).empty());
  CHECK(h.outcome.close_connection);
  CHECK(h.outcome.reason.find("COMPARE_SET reply of 204808 bytes would take the store to") !=
        std::string::npos);
  CHECK(h.store.value("/v") == value);
  // A new 150 KiB value fits, but not with its 150 KiB answer beside it.
  const std::string desired(150 * kib, 'd');
  CHECK(h.ask(1, req(StoreOp::CompareSet, {"/new"}, {"", desired})).empty());
  CHECK(h.outcome.close_connection);
  CHECK_FALSE(h.store.value("/new"));
  h.store.release_held(150 * kib);  // read: room for both again
  CHECK(h.ask(1, req(StoreOp::CompareSet, {"/v"}, {"other", "new"})) == bytes(value));
  CHECK(h.ask(1, req(StoreOp::CompareSet, {"/new"}, {"", desired})) == bytes(desired));
  CHECK(h.store.value("/new") == desired);
}

TEST_CASE("store: wait registrations count against the quota until answered or dropped",
          "[unit][store]") {
  Harness h(small_limits());
  const uint64_t k = kStoreEntryOverheadBytes;
  CHECK(h.ask(1, req(StoreOp::Wait, {"/a", "/b"})).empty());
  CHECK(h.store.used_bytes() == 2 * (2 + k));
  h.set(2, "/a", "1");
  CHECK(h.store.used_bytes() == (2 + 1 + k) + 2 * (2 + k));  // still waiting on /b
  h.set(2, "/b", "2");
  CHECK(h.woken() == Ids{1});
  CHECK(h.store.used_bytes() == 2 * (2 + 1 + k));
  CHECK(h.ask(3, req(StoreOp::Wait, {"/c"})).empty());
  h.store.disconnect(3);
  CHECK(h.store.used_bytes() == 2 * (2 + 1 + k));
  std::vector<std::string> missing(100, "/missing-key");  // 100 * 140 bytes of registrations
  CHECK(h.ask(4, req(StoreOp::Wait, missing)).empty());
  CHECK(h.outcome.close_connection);
  CHECK_FALSE(h.store.is_waiting(4));
  CHECK(h.store.used_bytes() == 2 * (2 + 1 + k));
}

TEST_CASE("store: replies keep their order and come back empty after clear", "[unit][store]") {
  StoreReplies replies;
  replies.add(7) = "first";
  replies.add(8) = std::string(StoreReplies::kKeptBytes + 1, 'x');
  REQUIRE(replies.size() == 2);
  CHECK(replies[0].connection == 7);
  CHECK(replies[0].bytes == "first");
  CHECK(replies[1].connection == 8);
  replies.clear();
  CHECK(replies.empty());
  CHECK(replies.add(9).empty());
  CHECK(replies.add(10).empty());
  for (int i = 0; i < 200; ++i) replies.add(11) = "stop";
  CHECK(replies.size() == 202);
  replies.clear();
  CHECK(replies.begin() == replies.end());
}

TEST_CASE(
    "store: a SET in place takes the request's strings or gives it others, and the values "
    "and quota stay right",
    "[unit][store]") {
  Harness h;
  StoreRequest first = req(StoreOp::Set, {"/key"}, {std::string(1000, 'a')});
  h.store.apply(1, first, h.replies);
  uint64_t used = h.store.used_bytes();
  CHECK(used == 4 + 1000 + kStoreEntryOverheadBytes);
  // Smaller, larger, then the same size again: each replaces the value, whatever buffer it uses.
  for (size_t size : {10, 5000, 5000, 1, 0}) {
    StoreRequest again = req(StoreOp::Set, {"/key"}, {std::string(size, 'b')});
    h.store.apply(1, again, h.replies);
    CHECK(h.store.value("/key") == std::string(size, 'b'));
    CHECK(h.store.used_bytes() == 4 + size + kStoreEntryOverheadBytes);
  }
  // A value with much spare room (the store copies it rather than keep the room) reads back.
  StoreRequest spare = req(StoreOp::Set, {"/other"}, {"tiny"});
  spare.values[0].reserve(100000);
  h.store.apply(1, spare, h.replies);
  CHECK(h.store.value("/other") == "tiny");
  CHECK(h.store.num_keys() == 2);
}
