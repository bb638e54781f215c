#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

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
  Store store;
  StoreOutcome outcome;
  std::vector<StoreReply> replies;

  std::vector<StoreReply>& run(StoreConnectionId connection, StoreRequest request) {
    replies.clear();
    outcome = store.apply(connection, std::move(request), replies);
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
  CHECK(h.ask(1, req(StoreOp::ListKeys)) == i64(3) + bytes("/a") + bytes("/b") + bytes("init/"));
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
