// collective_progress: a real PyTorch 2.11 dump and generated ones reduced to where each
// process group stands; missing, odd and unknown keys degrade field by field; long fields are
// capped. Also checks that the test's dump writer writes the real dump's shape.
#include "observe/collective_progress.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/support/flight_recorder_dump_writer.hpp"
#include "tests/support/test_paths.hpp"

using namespace cohort::observe;
using cohort::test::DumpGroup;
using cohort::test::RankDumpSpec;
using cohort::test::write_flight_recorder_dump;

namespace {

std::string fixture() {
  std::ifstream in(std::string(cohort::test::kSourceDir) +
                       "/tests/data/flight_recorder/torch-2.11-one-rank-queued-allreduce.pkl",
                   std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

PickleValue parse(const std::string& bytes) {
  PickleResult result = PickleReader().read(bytes);
  INFO(result.error);
  REQUIRE(result.ok());
  return *result.value;
}

// Where `a` and `b` differ in shape (dict keys in order, the type of each value, the shape of a
// list's first item), or "" when they do not. None matches an int (PyTorch writes either for a
// time not yet taken).
std::string shape_difference(const PickleValue& a, const PickleValue& b, const std::string& at) {
  const bool a_int_or_none = a.as_int() || a.is_none();
  const bool b_int_or_none = b.as_int() || b.is_none();
  if (a_int_or_none && b_int_or_none) return "";
  if (a.storage().index() != b.storage().index()) return at + ": another type";
  if (const PickleDict* dict = a.as_dict()) {
    const PickleDict& other = *b.as_dict();
    if (dict->size() != other.size()) return at + ": another number of keys";
    for (size_t i = 0; i < dict->size(); ++i) {
      if ((*dict)[i].first != other[i].first) return at + ": another key at " + std::to_string(i);
      const std::string* key = std::get_if<std::string>(&(*dict)[i].first);
      std::string inner = shape_difference((*dict)[i].second, other[i].second,
                                           at + "." + (key ? *key : std::string("#")));
      if (!inner.empty()) return inner;
    }
  }
  if (const PickleList* list = a.as_list()) {
    const PickleList& other = *b.as_list();
    if (list->empty() || other.empty()) return "";
    return shape_difference(list->front(), other.front(), at + "[0]");
  }
  return "";
}

}  // namespace

TEST_CASE("the PyTorch 2.11 dump reduces to its queued all_reduce number 16", "[unit][observe]") {
  RankCollectivesResult result = read_collective_progress(fixture());
  REQUIRE(result.value);
  const RankCollectives& dump = *result.value;
  CHECK(dump.version == "2.10");
  CHECK(dump.comm_lib_version == "2.28.9");
  CHECK_FALSE(dump.rank);
  REQUIRE(dump.groups.size() == 1);
  const GroupProgress& group = dump.groups[0];
  CHECK(group.id == "0");
  CHECK(group.desc == "default_pg");
  CHECK(group.size == 1);  // pg_config lists "[0]"
  CHECK(group.last_enqueued == 16);
  CHECK(group.last_started == -1);
  CHECK(group.last_completed == 15);
  REQUIRE(group.first_incomplete);
  CHECK(group.first_incomplete->seq == 16);
  CHECK(group.first_incomplete->op == "all_reduce");
  CHECK(group.first_incomplete->state == "scheduled");
  CHECK_FALSE(group.first_incomplete->started());
  CHECK(group.first_incomplete->input_sizes == std::vector<std::vector<int64_t>>{{1048576}});
  CHECK(group.first_incomplete->input_dtypes == std::vector<std::string>{"Float"});
  CHECK(group.first_incomplete->shape_text() == "[[1048576]] Float");
  REQUIRE(group.last_call);
  CHECK(group.last_call->seq == 16);
}

TEST_CASE("the test dump writer writes the shape of PyTorch's dump", "[unit][observe]") {
  DumpGroup group;
  group.last_enqueued = 16;
  group.last_completed = 15;
  group.ops = {{13, "broadcast"}, {14, "_all_gather_base"}, {15, "all_reduce_barrier"}};
  std::string written = write_flight_recorder_dump(RankDumpSpec{.groups = {group}});
  CHECK(shape_difference(parse(written), parse(fixture()), "dump") == "");
  // Read the same way, too.
  RankCollectivesResult ours = read_collective_progress(written);
  RankCollectivesResult theirs = read_collective_progress(fixture());
  REQUIRE(ours.value);
  REQUIRE(theirs.value);
  const GroupProgress& a = ours.value->groups.at(0);
  const GroupProgress& b = theirs.value->groups.at(0);
  CHECK(a.last_enqueued == b.last_enqueued);
  CHECK(a.last_completed == b.last_completed);
  CHECK(a.first_incomplete->shape_text() == b.first_incomplete->shape_text());
  CHECK(a.first_incomplete->state == b.first_incomplete->state);
  // A started collective under recorded start times.
  group.last_started = 16;
  ours = read_collective_progress(write_flight_recorder_dump(RankDumpSpec{.groups = {group}}));
  REQUIRE(ours.value);
  CHECK(ours.value->groups.at(0).first_incomplete->state == "started");
  CHECK(ours.value->groups.at(0).first_incomplete->started());
}

TEST_CASE("a dump with several process groups reduces to each", "[unit][observe]") {
  DumpGroup world;
  world.last_enqueued = 40;
  world.last_completed = 40;
  world.first_seq = 21;
  world.ranks = "[0, 1, 2, 3]";
  DumpGroup pair;
  pair.name = "1";
  pair.desc = "tp_group";
  pair.ranks = "[0, 1]";
  pair.pg_id = 1;
  pair.last_enqueued = 9;
  pair.last_completed = 7;
  pair.op = "_allgather_base";
  pair.sizes = {{4, 256}, {8}};
  pair.dtype = "BFloat16";
  RankCollectivesResult result =
      read_collective_progress(write_flight_recorder_dump(RankDumpSpec{.groups = {world, pair}}));
  REQUIRE(result.value);
  REQUIRE(result.value->groups.size() == 2);
  const GroupProgress& a = result.value->groups[0];
  CHECK(a.id == "0");
  CHECK(a.size == 4);
  CHECK_FALSE(a.first_incomplete);
  CHECK(a.last_call->seq == 40);
  const GroupProgress& b = result.value->groups[1];
  CHECK(b.id == "1");
  CHECK(b.desc == "tp_group");
  CHECK(b.size == 2);
  REQUIRE(b.first_incomplete);
  CHECK(b.first_incomplete->seq == 8);
  CHECK(b.first_incomplete->op == "_allgather_base");
  CHECK(b.first_incomplete->shape_text() == "[[4, 256], [8]] BFloat16,BFloat16");
  CHECK(b.last_call->seq == 9);
}

TEST_CASE("missing or odd keys leave their fields unknown and unknown keys are ignored",
          "[unit][observe]") {
  // No pg_config or pg_status: the entries still give the group, its last and first incomplete.
  PickleDict entry = {
      {"collective_seq_id", PickleValue(int64_t{7})},
      {"process_group",
       PickleValue(PickleList{PickleValue(std::string("3")), PickleValue(std::string("dp"))})},
      {"profiling_name", PickleValue(std::string("nccl:reduce_scatter"))},
      {"state", PickleValue(std::string("started"))},
      {"input_sizes", PickleValue(std::string("not a list"))},
      {"something_new", PickleValue(PickleDict{})},
  };
  PickleDict done = entry;
  done[0].second = PickleValue(int64_t{6});
  done[3].second = PickleValue(std::string("completed"));
  PickleDict odd = {{"collective_seq_id", PickleValue(std::string("8"))}};  // not an int
  PickleDict dump = {
      {"version", PickleValue(int64_t{2})},  // not a string
      {"entries", PickleValue(PickleList{PickleValue(done), PickleValue(entry), PickleValue(odd),
                                         PickleValue(int64_t{1})})},
      {"pg_status", PickleValue(PickleDict{{"3", PickleValue(std::string("?"))}})},
  };
  RankCollectives reduced = collective_progress(PickleValue(dump));
  CHECK(reduced.version.empty());
  REQUIRE(reduced.groups.size() == 1);
  const GroupProgress& group = reduced.groups[0];
  CHECK(group.id == "3");
  CHECK(group.desc == "dp");
  CHECK_FALSE(group.size);
  CHECK(group.last_enqueued == 7);  // from the entries
  CHECK(group.last_completed == 6);
  CHECK_FALSE(group.last_started);
  REQUIRE(group.first_incomplete);
  CHECK(group.first_incomplete->seq == 7);
  CHECK(group.first_incomplete->op == "reduce_scatter");
  CHECK(group.first_incomplete->input_sizes.empty());
  CHECK(group.first_incomplete->input_dtypes.empty());

  CHECK(collective_progress(PickleValue(PickleList{})).groups.empty());
  RankCollectivesResult not_dict = read_collective_progress(std::string("\x80\x02]q\x00.", 6));
  CHECK(not_dict.error == "not a flight-recorder dump: the pickle holds no dict");
  RankCollectivesResult corrupt = read_collective_progress(std::string("\x80\x02}q\x00(", 6));
  CHECK(corrupt.error.starts_with("not a readable pickle: byte 6: "));
}

TEST_CASE("long strings and lists in a dump are capped", "[unit][observe]") {
  DumpGroup group;
  group.last_enqueued = 2;
  group.last_completed = 1;
  group.desc = std::string(1000, 'd');
  group.op = std::string(1000, 'o');
  group.sizes = std::vector<std::vector<int64_t>>(100, std::vector<int64_t>(100, 3));
  RankCollectivesResult result =
      read_collective_progress(write_flight_recorder_dump(RankDumpSpec{.groups = {group}}));
  REQUIRE(result.value);
  const GroupProgress& reduced = result.value->groups.at(0);
  CHECK(reduced.desc.size() == kMaxCollectiveText);
  CHECK(reduced.first_incomplete->op.size() == kMaxCollectiveText);
  CHECK(reduced.first_incomplete->input_sizes.size() == kMaxCollectiveItems);
  CHECK(reduced.first_incomplete->input_sizes[0].size() == kMaxCollectiveItems);
  CHECK(reduced.first_incomplete->input_dtypes.size() == kMaxCollectiveItems);
}

TEST_CASE("a small dump whose memoized values unpickle to a huge tree is refused",
          "[unit][observe]") {
  // A list of 1,000 ints, memoized, then a list of it 3,000 times over: 6 KB that unpickle to 3
  // million values, each copied into the tree. Within the reader's absolute limits; a thousand
  // times what a dump of that size holds.
  std::string bomb("\x80\x02]q\x00(", 6);
  for (int i = 0; i < 1000; ++i) bomb += "K\x01";
  bomb += "e0}q\x01X";  // the list memoized, then popped
  bomb += std::string("\x07\x00\x00\x00", 4) + "entries](";
  for (int i = 0; i < 3000; ++i) bomb += std::string("h\x00", 2);
  bomb += "es.";
  CHECK(read_collective_progress(bomb, PickleLimits{}).value);  // the absolute limits take it
  RankCollectivesResult scaled = read_collective_progress(bomb);
  CHECK_FALSE(scaled.value);
  CHECK_THAT(scaled.error, Catch::Contains("more than 65536 values"));
  CHECK(dump_pickle_limits(3433).max_values == 65536);  // the floor, for small files
  CHECK(dump_pickle_limits(size_t{2} << 20).max_values == size_t{2} << 20);
  CHECK(dump_pickle_limits(size_t{64} << 20).max_string_bytes == size_t{256} << 20);
  CHECK(read_collective_progress(fixture()).value);  // a real dump reads within them
}
