#include "agent/collective_report.hpp"

#include <algorithm>

#include "common/untrusted_file.hpp"
#include "observe/collective_progress.hpp"

namespace cohort {
namespace {

// One rank's dump read and reduced, or why not.
proto::RankCollectivesReport read_rank(int rank, const FlightRecorderDump* dump,
                                       std::chrono::milliseconds waited,
                                       const std::string& missing) {
  proto::RankCollectivesReport report;
  report.rank = rank;
  if (dump == nullptr) {
    report.error = missing.empty()
                       ? "no flight-recorder pipe (no NCCL process group, or the recorder is off)"
                       : missing;
    return report;
  }
  // Not seen to settle (the wait was cut short when the workers stopped): read what is there,
  // which reads only if it is whole (a pickle ends with its STOP).
  if (!dump->complete && dump->bytes.value_or(0) == 0) {
    report.error = "no dump within " + dump_wait_seconds(waited) + " s";
    return report;
  }
  if (dump->bytes && *dump->bytes > kMaxDumpFileBytes) {
    report.error = "dump of " + std::to_string(*dump->bytes) + " bytes, over the limit";
    return report;
  }
  // The worker may have put anything there since it was seen (a FIFO would block the agent).
  UntrustedRead file = read_untrusted_file(dump->path, kMaxDumpFileBytes + 1);
  if (!file.ok) {
    report.error = "the dump could not be read: " + file.error;
    return report;
  }
  if (file.bytes.size() > kMaxDumpFileBytes) {
    report.error = "dump of " + std::to_string(file.file_bytes) + " bytes, over the limit";
    return report;
  }
  observe::RankCollectivesResult read = observe::read_collective_progress(file.bytes);
  if (!read.value) {
    report.error = dump->complete ? ("not a flight-recorder dump: " + read.error).substr(0, 256)
                                  : "no whole dump within " + dump_wait_seconds(waited) + " s";
    return report;
  }
  report.collectives = std::move(*read.value);
  report.collectives.groups = groups_to_send(std::move(report.collectives.groups));
  return report;
}

}  // namespace

std::vector<proto::GroupProgress> groups_to_send(std::vector<proto::GroupProgress> groups) {
  std::stable_partition(groups.begin(), groups.end(), [](const proto::GroupProgress& group) {
    return group.first_incomplete.has_value();
  });
  if (groups.size() > proto::kMaxSentProcessGroups) groups.resize(proto::kMaxSentProcessGroups);
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return groups;
}

proto::Collectives collective_report(int round, const std::string& host, int base_rank, int ranks,
                                     const std::vector<FlightRecorderDump>& dumps,
                                     std::chrono::milliseconds waited, const std::string& missing) {
  proto::Collectives report;
  report.round = round;
  report.host = host.substr(0, proto::kMaxProgressHostBytes);
  for (int rank = base_rank; rank < base_rank + ranks; ++rank) {
    auto found = std::find_if(dumps.begin(), dumps.end(),
                              [&](const FlightRecorderDump& dump) { return dump.rank == rank; });
    report.ranks.push_back(
        read_rank(rank, found == dumps.end() ? nullptr : &*found, waited, missing));
  }
  return report;
}

}  // namespace cohort
