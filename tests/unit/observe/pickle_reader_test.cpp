// PickleReader: a real flight-recorder dump and Python's own pickles read as plain values;
// truncated, deep, huge, self-referencing and object-building inputs give an error, never a crash.
#include "observe/pickle_reader.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/support/test_paths.hpp"

using namespace cohort::observe;

namespace {

template <size_t N>
std::string bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

std::string fixture() {
  std::ifstream in(std::string(cohort::test::kSourceDir) +
                       "/tests/data/flight_recorder/torch-2.11-one-rank-queued-allreduce.pkl",
                   std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string error_of(std::string_view input, PickleLimits limits = {}) {
  PickleResult result = PickleReader(limits).read(input);
  CHECK_FALSE(result.ok());
  return result.error;
}

}  // namespace

TEST_CASE("the flight-recorder dump of PyTorch 2.11 reads as its dict", "[unit][observe]") {
  PickleResult result = PickleReader().read(fixture());
  REQUIRE(result.ok());
  CHECK(result.error.empty());
  const PickleValue& dump = *result.value;
  REQUIRE(dump.get("version"));
  CHECK(*dump.get("version")->as_string() == "2.10");
  CHECK(*dump.get("comm_lib_version")->as_string() == "2.28.9");
  const PickleValue* status = dump.get("pg_status")->get("0");
  REQUIRE(status);
  CHECK(*status->get("last_enqueued_collective")->as_int() == 16);
  CHECK(*status->get("last_started_collective")->as_int() == -1);
  CHECK(*status->get("last_completed_collective")->as_int() == 15);
  CHECK(*dump.get("pg_config")->get("0")->get("ranks")->as_string() == "[0]");

  const PickleList& entries = *dump.get("entries")->as_list();
  REQUIRE(entries.size() == 16);
  const PickleValue& first = entries.front();
  CHECK(*first.get("time_created_ns")->as_int() == 1795666249896155146);  // LONG1
  CHECK(first.get("time_discovered_started_ns")->is_none());
  CHECK(*first.get("retired")->as_bool());
  CHECK_FALSE(*first.get("is_p2p")->as_bool());
  const PickleList& group = *first.get("process_group")->as_list();  // a tuple
  REQUIRE(group.size() == 2);
  CHECK(*group[1].as_string() == "default_pg");
  CHECK((*first.get("input_sizes")->as_list())[0].as_list()->at(0).as_int() != nullptr);
  CHECK(*(*first.get("input_sizes")->as_list())[0].as_list()->at(0).as_int() == 1048576);

  // The frames of the second entry are memo references (BINGET) to the first entry's.
  const PickleList& frames = *entries[1].get("frames")->as_list();
  REQUIRE(frames.size() == 3);
  CHECK(*frames[0].get("name")->as_string() == "all_reduce");
  CHECK(*frames[1].get("line")->as_int() == 83);

  const PickleValue& last = entries.back();
  CHECK(*last.get("collective_seq_id")->as_int() == 16);
  CHECK(*last.get("state")->as_string() == "scheduled");
  CHECK(*last.get("profiling_name")->as_string() == "nccl:all_reduce");
}

TEST_CASE("pickles of Python protocols 2 and 4 read the same", "[unit][observe]") {
  // pickle.dumps({'a': [1, -2, 2.5, None, True, 'x', 2**40, -2**63], 'b': (1, 'y'), 7: {}}, p)
  const std::string protocol2 = bytes(
      "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28\x4b\x01\x4a\xfe"
      "\xff\xff\xff\x47\x40\x04\x00\x00\x00\x00\x00\x00\x4e\x88\x58\x01\x00\x00\x00\x78\x71\x03"
      "\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x65\x58\x01\x00"
      "\x00\x00\x62\x71\x04\x4b\x01\x58\x01\x00\x00\x00\x79\x71\x05\x86\x71\x06\x4b\x07\x7d\x71"
      "\x07\x75\x2e");
  const std::string protocol4 = bytes(
      "\x80\x04\x95\x45\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x5d\x94\x28\x4b"
      "\x01\x4a\xfe\xff\xff\xff\x47\x40\x04\x00\x00\x00\x00\x00\x00\x4e\x88\x8c\x01\x78\x94\x8a"
      "\x06\x00\x00\x00\x00\x00\x01\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x65\x8c\x01\x62\x94"
      "\x4b\x01\x8c\x01\x79\x94\x86\x94\x4b\x07\x7d\x94\x75\x2e");
  for (const std::string& input : {protocol2, protocol4}) {
    PickleResult result = PickleReader().read(input);
    REQUIRE(result.ok());
    const PickleValue& top = *result.value;
    const PickleList& a = *top.get("a")->as_list();
    REQUIRE(a.size() == 8);
    CHECK(*a[0].as_int() == 1);
    CHECK(*a[1].as_int() == -2);
    CHECK(*a[2].as_float() == 2.5);
    CHECK(a[3].is_none());
    CHECK(*a[4].as_bool());
    CHECK(*a[5].as_string() == "x");
    CHECK(*a[6].as_int() == (int64_t{1} << 40));
    CHECK(*a[7].as_int() == INT64_MIN);
    const PickleList& b = *top.get("b")->as_list();
    REQUIRE(b.size() == 2);
    CHECK(*b[1].as_string() == "y");
    REQUIRE(top.get(7));
    CHECK(top.get(7)->as_dict()->empty());
    CHECK(top.get("missing") == nullptr);
    CHECK(a[0].get("a") == nullptr);  // not a dict
  }
}

TEST_CASE("the other opcodes for plain values read as Python reads them", "[unit][observe]") {
  // MARK, SHORT_BINSTRING 'k', BININT2 513, BINSTRING 'v', NEWFALSE, EMPTY_TUPLE, TUPLE3, DICT,
  // then SETITEM 'k' again (the last value wins), STOP.
  const std::string input = bytes(
      "\x80\x02(U\x01kM\x01\x02T\x01\x00\x00\x00v\x89)\x8a\x01\xff\x87"
      "d"
      "U\x01kK\x05s.");
  PickleResult result = PickleReader().read(input);
  REQUIRE(result.ok());
  const PickleValue& top = *result.value;
  CHECK(top.as_dict()->size() == 3);
  CHECK(*top.get("k")->as_int() == 5);
  const PickleList& tuple = *top.get("v")->as_list();
  REQUIRE(tuple.size() == 3);
  CHECK_FALSE(*tuple[0].as_bool());
  CHECK(tuple[1].as_list()->empty());
  CHECK(*tuple[2].as_int() == -1);

  // LIST from a MARK, APPEND, DUP, POP, POP_MARK, MEMOIZE and LONG_BINGET.
  const std::string list = bytes(
      "(K\x01K\x02l\x94K\x03"
      "a(K\x09\x31\x32\x30j\x00\x00\x00\x00\x86.");
  result = PickleReader().read(list);
  REQUIRE(result.ok());
  const PickleList& pair = *result.value->as_list();
  REQUIRE(pair.size() == 2);
  CHECK(pair[0].as_list()->size() == 3);  // the memoized list, appended to after the put
  CHECK(pair[1].as_list()->size() == 3);
}

TEST_CASE("a pickle cut at any length is an error naming the truncation", "[unit][observe]") {
  const std::string whole = fixture();
  for (size_t length = 0; length < whole.size(); ++length) {
    PickleResult result = PickleReader().read(std::string_view(whole).substr(0, length));
    INFO("length " << length);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error.find("truncated") != std::string::npos);
  }
}

TEST_CASE("object-building opcodes such as GLOBAL and REDUCE are refused", "[unit][observe]") {
  // pickle.dumps(os.system) style: GLOBAL 'os\nsystem\n'.
  std::string error = error_of(bytes("\x80\x02\x63os\nsystem\nq\x00."));
  CHECK(error == "byte 2: GLOBAL (opcode 0x63): building objects is not allowed");
  CHECK(error_of(bytes("\x80\x02NNR.")).find("REDUCE") != std::string::npos);
  CHECK(error_of(bytes("\x80\x02}Nb.")).find("BUILD") != std::string::npos);
  CHECK(error_of(bytes("\x80\x04\x8c\x02os\x8c\x06system\x93.")).find("STACK_GLOBAL") !=
        std::string::npos);
  CHECK(error_of(bytes("\x80\x02N\x81.")).find("NEWOBJ") != std::string::npos);
}

TEST_CASE("an unknown opcode or protocol is an error", "[unit][observe]") {
  CHECK(error_of(bytes("\x80\x02\xff.")) == "byte 2: unsupported opcode 0xff");
  CHECK(error_of(bytes("I1\n.")) == "byte 0: unsupported opcode 0x49");  // protocol 0's INT
  CHECK(error_of(bytes("\x80\x09N.")).find("protocol 9") != std::string::npos);
  CHECK(error_of("").find("truncated") != std::string::npos);
}

TEST_CASE("a memo get of an index never put is an error", "[unit][observe]") {
  CHECK(error_of(bytes("\x80\x02h\x05.")) == "byte 2: memo get of index 5, which was never put");
  CHECK(error_of(bytes("\x80\x02Nq\x00j\xff\xff\xff\xff.")).find("never put") != std::string::npos);
  PickleLimits limits;
  limits.max_memo_entries = 2;
  CHECK(error_of(bytes("\x80\x02Nq\x00q\x01q\x02."), limits).find("memo entries") !=
        std::string::npos);
}

TEST_CASE("length prefixes larger than the input are errors and never allocations",
          "[unit][observe]") {
  CHECK(error_of(bytes("\x80\x02X\xff\xff\xff\xff"
                       "abc")) == "byte 2: BINUNICODE needs 4294967295 bytes, 3 left (truncated)");
  CHECK(error_of(bytes("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7f"
                       "abc"))
            .find("truncated") != std::string::npos);
  CHECK(error_of(bytes("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xff.")).find("FRAME") !=
        std::string::npos);
  CHECK(error_of(bytes("\x80\x02\x8b\xff\xff\xff\x7f.")).find("wider than 64 bits") !=
        std::string::npos);
  CHECK(error_of(bytes("\x80\x02\x8b\xff\xff\xff\xff.")).find("negative") != std::string::npos);
  CHECK(error_of(bytes("\x80\x02T\xff\xff\xff\xff.")).find("negative") != std::string::npos);
  PickleLimits limits;
  limits.max_input_bytes = 4;
  CHECK(PickleReader(limits).read(bytes("\x80\x02N.")).ok());
  CHECK(error_of(bytes("\x80\x02NN."), limits).find("more than the limit of 4") !=
        std::string::npos);
}

TEST_CASE("nesting deeper than the limit is an error whatever makes it deep", "[unit][observe]") {
  // A million nested lists: ]]]...]aaa...a.
  const size_t deep = 1'000'000;
  std::string lists = "\x80\x02" + std::string(deep, ']') + std::string(deep - 1, 'a') + ".";
  CHECK(error_of(lists) ==
        "byte " + std::to_string(lists.size()) + ": lists and dicts nested deeper than 64");
  // MARKs open inside each other.
  CHECK(error_of("\x80\x02" + std::string(deep, '(')).find("MARKs nested deeper than 64") !=
        std::string::npos);
  // A list that holds itself (memo put, get, append): a cycle is as deep as it goes.
  CHECK(error_of(bytes("\x80\x02]q\x00h\x00"
                       "a."))
            .find("nested deeper") != std::string::npos);
  // 64 levels are fine.
  std::string ok = "\x80\x02" + std::string(64, ']') + std::string(63, 'a') + ".";
  CHECK(PickleReader().read(ok).ok());
}

TEST_CASE("a value memoized and used again and again is counted each time", "[unit][observe]") {
  // A list of two, memoized; a list holding it twice, memoized; ... 40 times: 2^40 values.
  std::string doubling = bytes("\x80\x02NN\x86q\x00\x30");
  for (int i = 0; i < 40; ++i) doubling += bytes("h\x00h\x00\x86q\x00\x30");
  doubling += bytes("h\x00.");
  std::string error = error_of(doubling);
  CHECK(error.find("more than 4000000 values") != std::string::npos);

  // A 1 KiB string used 2^20 times: over a small string budget.
  std::string strings = "\x80\x02X" + std::string("\x00\x04\x00\x00", 4) + std::string(1024, 's') +
                        bytes("q\x00\x30");
  for (int i = 0; i < 20; ++i) strings += bytes("h\x00h\x00\x86q\x00\x30");
  strings += bytes("h\x00.");
  PickleLimits limits;
  limits.max_string_bytes = 1 << 20;
  CHECK(error_of(strings, limits).find("bytes of strings") != std::string::npos);
}

TEST_CASE("a stack left odd at STOP or ops on the wrong type are errors", "[unit][observe]") {
  CHECK(error_of(bytes("\x80\x02NN.")) == "byte 4: STOP with 2 values on the stack, not 1");
  CHECK(error_of(bytes("\x80\x02.")) == "byte 2: STOP with 0 values on the stack, not 1");
  CHECK(error_of(bytes("\x80\x02(N.")) == "byte 4: STOP with a MARK still open");
  CHECK(error_of(bytes("\x80\x02}Na.")).find("APPEND on a dict, not a list") != std::string::npos);
  CHECK(error_of(bytes("\x80\x02]NNs.")).find("SETITEM on a list, not a dict") !=
        std::string::npos);
  CHECK(error_of(bytes("\x80\x02)Na.")).find("APPEND on a tuple") != std::string::npos);
  CHECK(error_of(bytes("\x80\x02}]Ns.")).find("dict key of type list") != std::string::npos);
  CHECK(error_of(bytes("\x80\x02}(Nu.")).find("a key and no value") != std::string::npos);
  CHECK(error_of(bytes("\x80\x02(e.")).find("APPENDS without a list") != std::string::npos);
  CHECK(error_of(bytes("\x80\x02"
                       "e."))
            .find("APPENDS without a MARK") != std::string::npos);
  CHECK(error_of(bytes("\x80\x02N(\x86.")).find("TUPLE2 with 0 values") != std::string::npos);
  CHECK(error_of(bytes("\x80\x02q\x00.")).find("memo put on an empty stack") != std::string::npos);
}
