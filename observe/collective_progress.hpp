// Where each process group of one rank stands in its collectives, read from that rank's NCCL
// flight-recorder dump: the last collective it enqueued, started and completed, and the first one
// it has not completed (op, input sizes and dtypes, state). Only what attributing a hang across
// ranks needs, with strings and lists capped; a missing or odd key leaves its field unknown and
// never fails the whole read, unknown keys are ignored. Pure; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "observe/pickle_reader.hpp"
#include "proto/collective_records.hpp"

namespace cohort::observe {

using proto::kMaxCollectiveItems;
using proto::kMaxCollectiveText;
using proto::kMaxProcessGroups;
using CollectiveCall = proto::CollectiveCall;
using GroupProgress = proto::GroupProgress;
using RankCollectives = proto::RankCollectives;

/// `dump` (a flight-recorder dump's top dict) reduced; anything not a dict gives no groups.
RankCollectives collective_progress(const PickleValue& dump);

struct RankCollectivesResult {
  std::optional<RankCollectives> value;
  std::string error;  ///< why the bytes are no dump, when `value` is unset
};

/// What a dump of `input_bytes` may unpickle to. PyTorch 2.11's hold about a third of a value
/// and three bytes of strings per byte of the file; memoized values used over and over can make
/// a small file unpickle to a tree a thousand times its size, so past one value and 16 bytes of
/// strings per byte (with a floor for small files) the dump is refused.
PickleLimits dump_pickle_limits(size_t input_bytes);

/// The dump file's bytes read (within dump_pickle_limits) and reduced.
RankCollectivesResult read_collective_progress(std::string_view bytes);
/// The same within `limits`.
RankCollectivesResult read_collective_progress(std::string_view bytes, const PickleLimits& limits);

}  // namespace cohort::observe
