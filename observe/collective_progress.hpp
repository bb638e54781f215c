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

namespace cohort::observe {

inline constexpr size_t kMaxCollectiveText = 128;  ///< bytes kept of each string
inline constexpr size_t kMaxCollectiveItems = 16;  ///< tensors, dimensions and dtypes kept
inline constexpr size_t kMaxProcessGroups = 1024;  ///< groups kept of one dump

/// One collective of a process group, as a rank's dump records it.
struct CollectiveCall {
  int64_t seq = -1;  ///< collective_seq_id
  std::string op;    ///< profiling_name without "nccl:": "all_reduce", "_allgather_base"
  std::vector<std::vector<int64_t>> input_sizes;  ///< capped at kMaxCollectiveItems both ways
  std::vector<std::string> input_dtypes;          ///< "Float", ...; capped
  std::string state;  ///< "scheduled", "started" or "completed"; "" when unknown

  bool completed() const { return state == "completed"; }
  bool started() const { return state == "started" || state == "completed"; }
  /// "[[1048576]] Float": the sizes and dtypes, for comparing ranks and for messages.
  std::string shape_text() const;
};

/// One process group as one rank sees it.
struct GroupProgress {
  std::string id;               ///< its name in the dump: pg_config's key, process_group[0] ("0")
  std::string desc;             ///< "default_pg"; "" when unknown
  std::optional<int64_t> size;  ///< how many ranks pg_config's "ranks" lists, when it parses
  /// pg_status's numbers (PyTorch writes -1 for none); the last enqueued and completed ones
  /// come from the entries when pg_status lacks them.
  std::optional<int64_t> last_enqueued, last_started, last_completed;
  std::optional<CollectiveCall> first_incomplete;  ///< the lowest seq not completed
  std::optional<CollectiveCall> last_call;         ///< the entry of the highest seq
};

/// One rank's dump reduced.
struct RankCollectives {
  std::string version;                ///< the dump format's "version" ("2.10"); "" when unknown
  std::string comm_lib_version;       ///< NCCL's ("2.28.9"); "" when unknown
  std::optional<int64_t> rank;        ///< when the dump says
  std::vector<GroupProgress> groups;  ///< by id; at most kMaxProcessGroups
};

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
