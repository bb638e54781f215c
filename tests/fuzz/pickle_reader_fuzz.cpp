// libFuzzer target: arbitrary bytes read as a pickle (PickleReader, with limits small enough for
// the fuzzer's allocation cap) and, when they read, reduced as a flight-recorder dump
// (collective_progress). Checks that nothing crashes, overflows the stack, leaks, overflows
// (UBSan), allocates from a length prefix or runs long, that a failure always says why, and that
// the reduced dump keeps to its caps.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "observe/collective_progress.hpp"
#include "observe/pickle_reader.hpp"

namespace {

using namespace cohort::observe;

void require(bool condition) {
  if (!condition) std::abort();
}

void check_call(const CollectiveCall& call) {
  require(call.op.size() <= kMaxCollectiveText);
  require(call.state.size() <= kMaxCollectiveText);
  require(call.input_sizes.size() <= kMaxCollectiveItems);
  require(call.input_dtypes.size() <= kMaxCollectiveItems);
  for (const auto& dims : call.input_sizes) require(dims.size() <= kMaxCollectiveItems);
  for (const auto& dtype : call.input_dtypes) require(dtype.size() <= kMaxCollectiveText);
  (void)call.shape_text();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  PickleLimits limits;
  limits.max_values = 100'000;
  limits.max_memo_entries = 10'000;
  limits.max_string_bytes = size_t{1} << 20;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  PickleResult result = PickleReader(limits).read(input);
  require(result.ok() == result.error.empty());
  if (!result.ok()) return 0;
  RankCollectives dump = collective_progress(*result.value);
  require(dump.groups.size() <= kMaxProcessGroups);
  for (const GroupProgress& group : dump.groups) {
    require(group.id.size() <= kMaxCollectiveText && group.desc.size() <= kMaxCollectiveText);
    if (group.first_incomplete) check_call(*group.first_incomplete);
    if (group.last_call) check_call(*group.last_call);
  }
  return 0;
}
