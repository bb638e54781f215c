// Where each process group of one rank stands in its collectives, as the NCCL flight recorder
// recorded it: what an agent reduces each local rank's dump to (observe/collective_progress) and
// sends the daemon in a `collectives` message, for the verdict across every rank of the round
// (rendezvous/collective_attribution). Plain data with the bounds the wire keeps; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cohort::proto {

inline constexpr size_t kMaxCollectiveText = 128;  ///< bytes kept of each string
inline constexpr size_t kMaxCollectiveItems = 16;  ///< tensors, dimensions and dtypes kept
inline constexpr size_t kMaxProcessGroups = 1024;  ///< groups kept of one dump
/// Groups of one rank a `collectives` message carries (those with a collective not completed
/// first): the message stays far below the frame limit however many groups a job makes.
inline constexpr size_t kMaxSentProcessGroups = 8;

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
  std::string shape_text() const {
    std::string text = "[";
    for (size_t i = 0; i < input_sizes.size(); ++i) {
      text += i > 0 ? ", [" : "[";
      for (size_t j = 0; j < input_sizes[i].size(); ++j) {
        if (j > 0) text += ", ";
        text += std::to_string(input_sizes[i][j]);
      }
      text += "]";
    }
    text += "]";
    for (size_t i = 0; i < input_dtypes.size(); ++i) text += (i > 0 ? "," : " ") + input_dtypes[i];
    return text;
  }
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

}  // namespace cohort::proto
