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

/// The dump file's bytes read and reduced.
RankCollectivesResult read_collective_progress(std::string_view bytes,
                                               const PickleLimits& limits = {});

}  // namespace cohort::observe
