// After a hang: this node's ranks' flight-recorder dumps, read and reduced to the `collectives`
// message the daemon attributes the hang from (which collective, which rank). A rank whose dump
// is missing, not written in time, too large or not a dump is sent with why; a rank's groups
// are cut to the few the verdict needs (those with a collective not completed first). Reads the
// dump files (bounded); on a thread of the agent's DumpReports, once a dump wait ends.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "agent/flight_recorder_dumps.hpp"
#include "proto/control_messages.hpp"

namespace cohort {

/// Dump files past this size are not read (PyTorch's default ring of 2000 entries is a few MB).
inline constexpr uint64_t kMaxDumpFileBytes = 64ull << 20;

/// The groups of one rank worth sending: those with a collective not completed first, then the
/// rest, at most proto::kMaxSentProcessGroups.
std::vector<proto::GroupProgress> groups_to_send(std::vector<proto::GroupProgress> groups);

/// The report of this node's ranks [base_rank, base_rank + ranks) from the dumps a wait found.
/// `missing`: why a rank not in `dumps` has none (default: it made no pipe).
proto::Collectives collective_report(int round, const std::string& host, int base_rank, int ranks,
                                     const std::vector<FlightRecorderDump>& dumps,
                                     std::chrono::milliseconds waited,
                                     const std::string& missing = {});

}  // namespace cohort
