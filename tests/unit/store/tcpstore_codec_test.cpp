#include <catch2/catch.hpp>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "store/tcpstore_codec.hpp"
#include "store/tcpstore_limits.hpp"
#include "tests/support/wire_bytes.hpp"

using namespace cohort;
using namespace cohort::test;

// The largest single allocation made while a LargestAllocation is alive: this binary's global
// operator new is replaced to watch it, which proves that a length prefix is not allocated from.
// Sanitizer builds keep their own allocator (the fuzzer's -malloc_limit_mb covers them).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COHORT_WATCH_ALLOCATIONS 0
#else
#define COHORT_WATCH_ALLOCATIONS 1
#endif

namespace {
size_t g_largest_allocation = 0;
bool g_watching_allocations = false;

struct LargestAllocation {
  LargestAllocation() {
    g_largest_allocation = 0;
    g_watching_allocations = true;
  }
  ~LargestAllocation() { g_watching_allocations = false; }
  size_t bytes() const { return g_largest_allocation; }
};
}  // namespace

#if COHORT_WATCH_ALLOCATIONS
// g++ 12 sees free() of operator new's memory once both are inlined; here they do match.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  if (g_watching_allocations && size > g_largest_allocation) g_largest_allocation = size;
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return operator new(size); }
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, size_t) noexcept { std::free(memory); }
void operator delete[](void* memory) noexcept { std::free(memory); }
void operator delete[](void* memory, size_t) noexcept { std::free(memory); }
#pragma GCC diagnostic pop
#endif

namespace {

struct Decoded {
  std::vector<StoreRequest> requests;
  bool error = false;
  std::string message;
};

// Feeds `wire` in pieces cut at `cuts` (ascending offsets) and collects what comes out.
Decoded decode(const std::string& wire, const std::vector<size_t>& cuts,
               StoreNumbering legacy = StoreNumbering::Legacy113) {
  TcpStoreDecoder decoder(legacy);
  Decoded result;
  size_t start = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(wire.size());
  for (size_t end : ends) {
    std::string_view piece(wire.data() + start, end - start);
    start = end;
    for (;;) {
      DecodeStep step = decoder.feed(piece);
      REQUIRE(step.consumed <= piece.size());
      piece.remove_prefix(step.consumed);
      if (step.status == DecodeStatus::Error) {
        result.error = true;
        result.message = decoder.error();
        return result;
      }
      if (step.status == DecodeStatus::NeedMore) {
        REQUIRE(piece.empty());
        break;
      }
      result.requests.push_back(decoder.take_request());
    }
  }
  return result;
}

Decoded decode_whole(const std::string& wire, StoreNumbering legacy = StoreNumbering::Legacy113) {
  return decode(wire, {}, legacy);
}

Decoded decode_bytewise(const std::string& wire,
                        StoreNumbering legacy = StoreNumbering::Legacy113) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < wire.size(); ++i) cuts.push_back(i);
  return decode(wire, cuts, legacy);
}

StoreRequest req(StoreOp op, std::vector<std::string> keys = {},
                 std::vector<std::string> values = {}, int64_t number = 0) {
  return StoreRequest{op, std::move(keys), std::move(values), number};
}

// One request of every op a numbering has, with awkward contents (NUL bytes, empty fields).
std::vector<StoreRequest> samples(StoreNumbering numbering) {
  std::string nul_key("a\0b", 3);
  std::vector<StoreRequest> all = {
      req(StoreOp::Set, {"/k1"}, {"v1"}),
      req(StoreOp::Set, {""}, {""}),
      req(StoreOp::CompareSet, {"/cs"}, {"", std::string(300, 'x')}),
      req(StoreOp::Get, {nul_key}),
      req(StoreOp::Add, {"/cnt"}, {}, -5),
      req(StoreOp::Check, {"/a", "/b", ""}),
      req(StoreOp::Check, {}),
      req(StoreOp::Wait, {"/k1"}),
      req(StoreOp::Wait, {"/x", "/x"}),
      req(StoreOp::GetNumKeys),
      req(StoreOp::DeleteKey, {"/k1"}),
      req(StoreOp::MultiGet, {"/a", "/b"}),
      req(StoreOp::MultiSet, {"/a", "/b"}, {"1", std::string("\0\0", 2)}),
      req(StoreOp::MultiSet, {}, {}),
      req(StoreOp::CancelWait),
  };
  if (numbering == StoreNumbering::Legacy113) all.push_back(req(StoreOp::WatchKey, {"/w"}));
  if (numbering != StoreNumbering::Legacy113) all.push_back(req(StoreOp::Append, {"/a"}, {"+"}));
  if (numbering == StoreNumbering::Validated) {
    std::vector<StoreRequest> newer = {
        req(StoreOp::Ping, {}, {}, 4242),
        req(StoreOp::QueuePush, {"q"}, {"item"}),
        req(StoreOp::QueuePop, {"q"}),
        req(StoreOp::QueueLen, {"q"}),
        req(StoreOp::ListKeys),
        req(StoreOp::Barrier, {"/bar"}, {}, 8),
        req(StoreOp::Validate, {}, {}, kStoreValidateMagic),
    };
    all.insert(all.begin(), req(StoreOp::Validate, {}, {}, kStoreValidateMagic));
    all.insert(all.end(), newer.begin(), newer.end());
  }
  return all;
}

std::string encode_all(const std::vector<StoreRequest>& requests, StoreNumbering numbering) {
  std::string wire;
  for (const auto& request : requests) REQUIRE(append_request(wire, request, numbering));
  return wire;
}

}  // namespace

TEST_CASE("codec: the example bytes of the protocol spec decode", "[unit][proto][tcpstore]") {
  std::string wire =
      hex("00 03 00 00 00 00 00 00 00 2f 6b 31 02 00 00 00 00 00 00 00 76 31") +  // SET
      hex("05 01 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 2f 6b 31") +        // WAIT
      hex("02 03 00 00 00 00 00 00 00 2f 6b 31") +                                // GET
      hex("03 04 00 00 00 00 00 00 00 2f 63 6e 74 05 00 00 00 00 00 00 00");      // ADD
  std::vector<StoreRequest> expected = {
      req(StoreOp::Set, {"/k1"}, {"v1"}),
      req(StoreOp::Wait, {"/k1"}),
      req(StoreOp::Get, {"/k1"}),
      req(StoreOp::Add, {"/cnt"}, {}, 5),
  };
  Decoded whole = decode_whole(wire);
  REQUIRE_FALSE(whole.error);
  CHECK(whole.requests == expected);
  CHECK(decode_bytewise(wire).requests == expected);

  TcpStoreDecoder decoder;
  decoder.feed(wire);
  CHECK(decoder.numbering() == StoreNumbering::Legacy113);
}

TEST_CASE("codec: every request of every numbering, whole, byte by byte and at every split",
          "[unit][proto][tcpstore]") {
  auto numbering =
      GENERATE(StoreNumbering::Legacy113, StoreNumbering::Legacy21, StoreNumbering::Validated);
  auto legacy = numbering == StoreNumbering::Validated ? StoreNumbering::Legacy113 : numbering;
  std::vector<StoreRequest> requests = samples(numbering);
  std::string wire = encode_all(requests, numbering);
  INFO("numbering " << int(numbering));

  Decoded whole = decode_whole(wire, legacy);
  REQUIRE_FALSE(whole.error);
  CHECK(whole.requests == requests);

  Decoded bytewise = decode_bytewise(wire, legacy);
  REQUIRE_FALSE(bytewise.error);
  CHECK(bytewise.requests == requests);

  for (size_t cut = 1; cut < wire.size(); ++cut) {
    Decoded split = decode(wire, {cut}, legacy);
    REQUIRE_FALSE(split.error);
    REQUIRE(split.requests == requests);
  }
  for (size_t cut = 1; cut + 7 < wire.size(); cut += 7) {
    Decoded split = decode(wire, {cut, cut + 3, cut + 7}, legacy);
    REQUIRE(split.requests == requests);
  }
}

TEST_CASE("codec: each request alone at every split point", "[unit][proto][tcpstore]") {
  for (auto numbering : {StoreNumbering::Legacy113, StoreNumbering::Validated}) {
    std::string prefix;
    if (numbering == StoreNumbering::Validated) {
      append_request(prefix, req(StoreOp::Validate, {}, {}, kStoreValidateMagic), numbering);
    }
    for (const auto& request : samples(numbering)) {
      std::string wire = prefix + encode_all({request}, numbering);
      for (size_t cut = 1; cut < wire.size(); ++cut) {
        Decoded split = decode(wire, {cut});
        INFO(op_name(request.op) << " cut at " << cut);
        REQUIRE_FALSE(split.error);
        REQUIRE(split.requests.back() == request);
      }
    }
  }
}

TEST_CASE("codec: a request completes with its last byte, not later", "[unit][proto][tcpstore]") {
  TcpStoreDecoder decoder;
  // A 1-byte legacy GETNUMKEYS is answered at once, without waiting for more bytes.
  DecodeStep step = decoder.feed(hex("06"));
  CHECK(step.status == DecodeStatus::Request);
  CHECK(step.consumed == 1);
  CHECK(decoder.take_request().op == StoreOp::GetNumKeys);
  CHECK(decoder.numbering() == StoreNumbering::Legacy113);
  CHECK(decoder.idle());

  std::string get = hex("02") + u64(2) + "/k";
  for (size_t i = 0; i + 1 < get.size(); ++i) {
    CHECK(decoder.feed(get.substr(i, 1)).status == DecodeStatus::NeedMore);
    CHECK_FALSE(decoder.idle());
  }
  CHECK(decoder.feed(get.substr(get.size() - 1)).status == DecodeStatus::Request);
  CHECK(decoder.take_request() == req(StoreOp::Get, {"/k"}));

  // Empty input is no progress.
  step = decoder.feed("");
  CHECK(step.status == DecodeStatus::NeedMore);
  CHECK(step.consumed == 0);
}

TEST_CASE("codec: dialect detection from the first bytes", "[unit][proto][tcpstore]") {
  SECTION("VALIDATE decided only on the fifth byte") {
    TcpStoreDecoder decoder;
    CHECK(decoder.feed(hex("00")).status == DecodeStatus::NeedMore);
    CHECK_FALSE(decoder.numbering().has_value());
    CHECK(decoder.feed(hex("ce f7 85")).status == DecodeStatus::NeedMore);
    CHECK_FALSE(decoder.numbering().has_value());
    DecodeStep step = decoder.feed(hex("3c 07"));
    CHECK(step.status == DecodeStatus::Request);
    CHECK(step.consumed == 1);
    CHECK(decoder.numbering() == StoreNumbering::Validated);
    CHECK(decoder.take_request() == req(StoreOp::Validate, {}, {}, kStoreValidateMagic));
    // 07 is GETNUMKEYS in the VALIDATE era (WATCH_KEY in 1.13).
    CHECK(decoder.feed(hex("07")).status == DecodeStatus::Request);
    CHECK(decoder.take_request().op == StoreOp::GetNumKeys);
  }
  SECTION("a 1.13 SET starting with 0x00 stays a SET") {
    std::string wire = hex("00") + u64(3) + "/k1" + u64(2) + "v1" + hex("06");
    Decoded decoded = decode_bytewise(wire);
    REQUIRE(decoded.requests.size() == 2);
    CHECK(decoded.requests[0] == req(StoreOp::Set, {"/k1"}, {"v1"}));
    CHECK(decoded.requests[1].op == StoreOp::GetNumKeys);
  }
  SECTION("a 1.13 SET whose key length ends in the magic's last bytes") {
    // Bytes 1..4 differ from the magic only in the last one.
    std::string wire = hex("00 ce f7 85 3d 00 00 00 00");
    TcpStoreDecoder decoder;
    DecodeStep step = decoder.feed(wire);
    CHECK(step.status == DecodeStatus::Error);  // a 1 GB key: over the limit
    CHECK(decoder.numbering() == StoreNumbering::Legacy113);
  }
  SECTION("first byte not zero: legacy at once, later zero is SET") {
    std::string wire = hex("06") + hex("00") + u64(1) + "k" + u64(0);
    Decoded decoded = decode_bytewise(wire);
    REQUIRE(decoded.requests.size() == 2);
    CHECK(decoded.requests[1] == req(StoreOp::Set, {"k"}, {""}));
  }
  SECTION("the magic later in a legacy stream is not VALIDATE") {
    std::string wire = hex("06 00 ce f7 85 3c 00 00 00 00");
    Decoded decoded = decode_whole(wire);
    CHECK(decoded.requests.size() == 1);
    CHECK(decoded.error);  // a SET with a 1 GB key
  }
  SECTION("VALIDATE-era VALIDATE with a wrong magic") {
    std::string wire = hex("00 ce f7 85 3c 00 ce f7 85 3d");
    Decoded decoded = decode_bytewise(wire);
    CHECK(decoded.requests.size() == 1);
    CHECK(decoded.error);
    CHECK_THAT(decoded.message, Catch::Contains("magic"));
  }
  SECTION("the 2.1 numbering switch") {
    std::string wire = hex("07") + u64(1) + "k" + hex("08") + u64(1) + "k" + u64(1) + "v";
    Decoded decoded = decode_whole(wire, StoreNumbering::Legacy21);
    REQUIRE(decoded.requests.size() == 2);
    CHECK(decoded.requests[0] == req(StoreOp::DeleteKey, {"k"}));
    CHECK(decoded.requests[1] == req(StoreOp::Append, {"k"}, {"v"}));
    // The same bytes in 1.13: WATCH_KEY, DELETE_KEY, then a COMPARE_SET with a huge key.
    Decoded legacy = decode_whole(wire);
    REQUIRE(legacy.requests.size() == 2);
    CHECK(legacy.requests[0] == req(StoreOp::WatchKey, {"k"}));
    CHECK(legacy.requests[1] == req(StoreOp::DeleteKey, {"k"}));
    CHECK(legacy.error);
  }
  SECTION("2.1-only opcodes are understood on a 1.13 connection") {
    std::string wire = hex("09") + u64(1) + u64(1) + "k" + hex("0b");
    Decoded decoded = decode_whole(wire);
    REQUIRE(decoded.requests.size() == 2);
    CHECK(decoded.requests[0] == req(StoreOp::MultiGet, {"k"}));
    CHECK(decoded.requests[1].op == StoreOp::CancelWait);
  }
}

TEST_CASE("codec: unknown opcodes are errors, and errors are final", "[unit][proto][tcpstore]") {
  Decoded legacy = decode_whole(hex("0c"));
  CHECK(legacy.error);
  CHECK_THAT(legacy.message, Catch::Contains("opcode 12"));
  CHECK(decode_whole(hex("ff")).error);
  CHECK(decode_whole(hex("00 ce f7 85 3c 13")).error);  // 19 is past BARRIER
  CHECK(decode_whole(hex("0c"), StoreNumbering::Legacy21).error);

  TcpStoreDecoder decoder;
  CHECK(decoder.feed(hex("0c 06")).status == DecodeStatus::Error);
  DecodeStep again = decoder.feed(hex("06"));
  CHECK(again.status == DecodeStatus::Error);
  CHECK(again.consumed == 0);
}

TEST_CASE("codec: oversized lengths are rejected before any allocation",
          "[unit][proto][tcpstore]") {
  struct Case {
    const char* name;
    std::string wire;
  };
  std::vector<Case> cases = {
      {"key over 64 KiB", hex("02") + u64(kStoreMaxKeyBytes + 1)},
      {"huge key", hex("02") + u64(~0ULL)},
      {"value over 64 MiB",
       hex("00 01") + std::string(7, '\0') + "k" + u64(kStoreMaxValueBytes + 1)},
      {"huge value", hex("00 01") + std::string(7, '\0') + "k" + u64(1ULL << 62)},
      {"too many WAIT keys", hex("05") + u64(kStoreMaxKeysPerRequest + 1)},
      {"huge MULTI_GET count", hex("09") + u64(~0ULL)},
      {"huge key in MULTI_SET", hex("0a") + u64(1) + u64(1ULL << 40)},
      {"huge value in COMPARE_SET", hex("01") + u64(1) + "k" + u64(0) + u64(1ULL << 33)},
  };
  for (const auto& each : cases) {
    INFO(each.name);
    {
      LargestAllocation watch;
      Decoded decoded = decode_bytewise(each.wire);
      CHECK(decoded.error);
      CHECK(watch.bytes() < 64 * 1024);
    }
    LargestAllocation watch;
    TcpStoreDecoder decoder;
    DecodeStep step = decoder.feed(each.wire + "more bytes that are never read");
    CHECK(step.status == DecodeStatus::Error);
    CHECK(step.consumed == each.wire.size());
    CHECK(watch.bytes() < 64 * 1024);
  }
}

TEST_CASE("codec: lengths at the limits are accepted", "[unit][proto][tcpstore]") {
  std::string key(kStoreMaxKeyBytes, 'k');
  std::string wire = hex("02") + u64(key.size()) + key;
  Decoded decoded = decode_whole(wire);
  REQUIRE(decoded.requests.size() == 1);
  CHECK(decoded.requests[0].keys[0] == key);

  TcpStoreDecoder decoder;
  CHECK(decoder.feed(hex("05") + u64(kStoreMaxKeysPerRequest)).status == DecodeStatus::NeedMore);
  LargestAllocation watch;
  TcpStoreDecoder value_decoder;
  CHECK(value_decoder.feed(hex("00 01") + std::string(7, '\0') + "k" + u64(kStoreMaxValueBytes))
            .status == DecodeStatus::NeedMore);
  CHECK(watch.bytes() < 64 * 1024);  // the body grows with the bytes, not with the prefix
}

TEST_CASE("codec: each field declares what its string takes, an empty one too",
          "[unit][proto][tcpstore]") {
  std::vector<uint64_t> asked;
  TcpStoreDecoder decoder;
  decoder.check_declared([&](uint64_t declared) {
    asked.push_back(declared);
    return std::string();
  });
  // A 1.13 MULTI_SET of two empty pairs, then "ab" = "cde".
  std::string wire =
      hex("0a") + u64(3) + u64(0) + u64(0) + u64(0) + u64(0) + bytes("ab") + bytes("cde");
  REQUIRE(decoder.feed(wire).status == DecodeStatus::Request);
  const uint64_t field = kStoreFieldOverheadBytes;
  CHECK(asked == std::vector<uint64_t>{field, 2 * field, 3 * field, 4 * field, 5 * field + 2,
                                       6 * field + 5});
  // So a request of empty fields is refused once they take too much, like one of long fields.
  TcpStoreDecoder bounded;
  bounded.check_declared([](uint64_t declared) {
    return declared > 1000 * kStoreFieldOverheadBytes ? "too much" : "";
  });
  std::string empty_pairs = hex("0a") + u64(kStoreMaxKeysPerRequest);
  for (int pair = 0; pair < 1000; ++pair) empty_pairs += u64(0) + u64(0);
  DecodeStep step = bounded.feed(empty_pairs);
  CHECK(step.status == DecodeStatus::Error);
  CHECK(step.consumed == 1 + 8 + 1000 * 8 + 8);  // the 1001st field was refused
  CHECK(bounded.error() == "MULTI_SET: too much");
}

TEST_CASE("codec: reply encoders", "[unit][proto][tcpstore]") {
  std::string out;
  append_u8(out, 3);
  CHECK(out == hex("03"));
  out.clear();
  append_i64(out, 5);
  CHECK(out == hex("05 00 00 00 00 00 00 00"));
  out.clear();
  append_i64(out, -1);
  CHECK(out == hex("ff ff ff ff ff ff ff ff"));
  out.clear();
  append_u32(out, 0x3C85F7CE);
  CHECK(out == hex("ce f7 85 3c"));
  out.clear();
  append_bytes(out, "v1");
  CHECK(out == hex("02 00 00 00 00 00 00 00 76 31"));
  out.clear();
  append_bytes(out, "");
  CHECK(out == u64(0));

  std::string validate;
  REQUIRE(append_request(validate, req(StoreOp::Validate, {}, {}, kStoreValidateMagic),
                         StoreNumbering::Validated));
  CHECK(validate == hex("00 ce f7 85 3c"));
  std::string none;
  CHECK_FALSE(append_request(none, req(StoreOp::Ping), StoreNumbering::Legacy113));
  CHECK_FALSE(append_request(none, req(StoreOp::WatchKey, {"k"}), StoreNumbering::Validated));
  CHECK(none.empty());
}

TEST_CASE("codec: op names", "[unit][proto][tcpstore]") {
  CHECK(op_name(StoreOp::CompareSet) == "COMPARE_SET");
  CHECK(op_name(StoreOp::Barrier) == "BARRIER");
  CHECK(op_name(StoreOp::GetNumKeys) == "GETNUMKEYS");
}

TEST_CASE(
    "codec: requests decoded in place and recycled read as taken ones, whatever was left in "
    "their strings",
    "[unit][proto][tcpstore]") {
  std::vector<StoreRequest> sent = {
      req(StoreOp::Set, {"/first/key"}, {std::string(300, 'a')}),
      req(StoreOp::MultiSet, {"/k1", "/k2"}, {"v1", "v2"}),
      req(StoreOp::Get, {"/k"}),
      req(StoreOp::Add, {"/counter/of/many/ranks"}, {}, 5),
      req(StoreOp::GetNumKeys),
  };
  std::string wire = encode_all(sent, StoreNumbering::Legacy113);
  REQUIRE(decode_whole(wire).requests == sent);

  TcpStoreDecoder decoder;
  std::vector<StoreRequest> in_place;
  std::string_view rest = wire;
  while (!rest.empty()) {
    DecodeStep step = decoder.feed(rest);
    rest.remove_prefix(step.consumed);
    REQUIRE(step.status == DecodeStatus::Request);
    StoreRequest& request = decoder.request();
    in_place.push_back(request);
    // What a store may leave behind: strings it swapped for old buffers, or took.
    for (auto& key : request.keys) key = "left behind by the store";
    if (!request.values.empty()) request.values[0] = std::string(500, 'z');
    if (request.values.size() > 1) std::string(std::move(request.values[1]));
    decoder.recycle_request();
    CHECK(decoder.idle());
  }
  CHECK(in_place == sent);
}

TEST_CASE("a TCPStore client's first request is told from other protocols' first bytes",
          "[unit][store]") {
  // What a worker sends to the rendezvous port by mistake: 2.2+ VALIDATE, a 1.13 ADD "init/".
  std::string validate, add;
  REQUIRE(append_request(validate, StoreRequest{StoreOp::Validate, {}, {}, kStoreValidateMagic},
                         StoreNumbering::Validated));
  REQUIRE(
      append_request(add, StoreRequest{StoreOp::Add, {"init/"}, {}, 1}, StoreNumbering::Legacy113));
  CHECK(starts_like_tcpstore_request(validate));
  CHECK(starts_like_tcpstore_request(add.substr(0, 16)));
  CHECK_FALSE(starts_like_tcpstore_request(add.substr(0, 8)));  // not enough to tell
  CHECK_FALSE(starts_like_tcpstore_request("GET / HTTP/1.0\r\n\r\n"));
  CHECK_FALSE(starts_like_tcpstore_request("SSH-2.0-OpenSSH_9.2p1\r\n"));
  CHECK_FALSE(starts_like_tcpstore_request(std::string("\x00\x00\x00\x2a{\"type\":\"hello\"", 20)));
  CHECK_FALSE(starts_like_tcpstore_request(""));
  // Too few to tell: nothing yet, or a short start of an older table's request.
  CHECK(may_start_tcpstore_request(""));
  CHECK(may_start_tcpstore_request(add.substr(0, 1)));
  CHECK(may_start_tcpstore_request(add.substr(0, 8)));
  CHECK_FALSE(may_start_tcpstore_request(add.substr(0, 9)));  // enough: it is or it is not
  CHECK_FALSE(may_start_tcpstore_request("G"));               // the probe, from its first byte
  CHECK_FALSE(may_start_tcpstore_request("SSH-2.0"));
}
