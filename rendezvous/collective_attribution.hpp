// Which collective, which rank: across the NCCL flight-recorder dumps of every rank of a round
// (each reduced by observe/collective_progress), finds per process group the collective where
// the ranks part ways and says why: some ranks never enqueued it (missing), ranks enqueued
// different ops or shapes under the same number (desync), or every rank started it and none
// finished (stuck in the network). One line for people, and the same as fields for an event.
// Pure; whoever gathered the dumps owns the result; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "observe/collective_progress.hpp"

namespace cohort::rdzv {

/// One rank's dump, reduced, and the host it ran on.
struct RankDumpRecords {
  std::string host;
  observe::RankCollectives collectives;
};

/// A rank of the round with no usable dump: none was written, or it did not read.
struct RankWithoutDump {
  std::string host;
  std::string reason;  ///< "no dump", or the reader's error
};

enum class Divergence {
  kNone,     ///< no rank waits in this group
  kUnknown,  ///< ranks wait, and the dumps show no rank missing or disagreeing
  kMissing,  ///< some ranks enqueued the collective and wait; the culprits never enqueued it
  kDesync,   ///< ranks enqueued different ops, sizes or dtypes as the same collective
  kStuck,    ///< every rank enqueued (or started) it and none completed it
};

const char* divergence_name(Divergence divergence);  ///< "missing", "desync", ...

/// One process group's verdict.
struct GroupAttribution {
  std::string pg;       ///< its id in the dumps ("0")
  std::string pg_desc;  ///< "default_pg"; "" when no dump says
  int64_t seq = -1;     ///< the collective where ranks part ways
  std::string op;       ///< what the waiting ranks enqueued as it ("all_reduce")
  Divergence divergence = Divergence::kNone;
  int ranks = 0;              ///< ranks whose dumps have the group
  std::vector<int> waiting;   ///< ranks that enqueued it and wait (desync: the largest party)
  std::vector<int> culprits;  ///< missing: never enqueued it; desync: the other parties
  std::vector<std::string> culprit_hosts;  ///< their hosts, each once, in rank order
  std::string text;  ///< "all_reduce #4120 on default_pg (32 ranks): 31 ranks enqueued ..."
};

/// The verdict over every group.
struct CollectiveAttribution {
  std::vector<GroupAttribution> groups;  ///< the groups where some rank waits, by id
  std::optional<size_t> primary;         ///< the group the text names, index into `groups`
  std::vector<int> without_dump;         ///< ranks with no usable dump
  /// One line: the primary group's text and the ranks without a dump, or that no collective
  /// waits.
  std::string text;
};

/// The verdict from `dumps` (global rank to its dump) and the round's ranks without one.
CollectiveAttribution attribute_collectives(const std::map<int, RankDumpRecords>& dumps,
                                            const std::map<int, RankWithoutDump>& without_dump);

/// One rank's dump file as found: its bytes, or none when the rank wrote none.
struct RankDumpFile {
  std::string host;
  std::optional<std::string> bytes;
};

/// Each file read (observe::read_collective_progress); one that is missing or does not read is
/// a rank without a dump, and the others are still used.
CollectiveAttribution attribute_dump_files(const std::map<int, RankDumpFile>& files);

/// "0-12,14-31": sorted ranks as ranges, cut at a range to at most `max_chars` characters with
/// ",... (N more)" added when it does not fit.
std::string rank_ranges_text(const std::vector<int>& ranks, size_t max_chars = 96);

}  // namespace cohort::rdzv
