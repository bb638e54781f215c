// A round's flight-recorder dumps, gathered from every member once a hang is declared: which
// nodes were asked and for which ranks, what each sent (reduced, in `collectives` messages), the
// deadline, and the hung node's failure report, held until the verdict is in (or the deadline
// passes) so that the other nodes' workers still run while their dumps are written. The verdict
// is rendezvous/collective_attribution's, with the culprit ranks' nodes. Pure (time passed in);
// one per run, owned by the daemon's Run; the daemon's thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/byte_budget.hpp"
#include "proto/control_messages.hpp"
#include "rendezvous/collective_attribution.hpp"
#include "rendezvous/rendezvous_types.hpp"

namespace cohort::rdzv {

/// The ranks one member of the round runs: [first, first + count).
struct MemberRanks {
  int first = 0;
  int count = 0;
  std::string host;  ///< its address, until its report names its host
};

/// What the gathering found, for the failure report it held.
struct HangVerdict {
  CollectiveAttribution attribution;
  std::string text;                        ///< the line for the summary and the restart reason
  std::vector<std::string> culprit_nodes;  ///< node ids of the culprit ranks (missing, desync)
  bool attributed = false;                 ///< a divergence was found (missing, desync, stuck)
  bool had_dumps = false;                  ///< some rank's dump came and read
};

/// What one gathering keeps of the ranks' reduced dumps (about a kilobyte a rank): past it, a
/// rank's dump counts as missing, so that members reporting the largest dumps the protocol allows
/// (tens of kilobytes a rank, thousands of ranks a node) cannot hold gigabytes.
constexpr size_t kMaxGatheredDumpBytes = size_t{256} << 20;
/// What all of a daemon's gatherings keep together (a ByteBudget they share): without it, a
/// client that starts runs and declares a hang in each would hold kMaxGatheredDumpBytes per run.
constexpr size_t kMaxAllGatheredDumpBytes = size_t{512} << 20;

class DumpGathering {
 public:
  /// `all_dumps`, when given, is shared with the daemon's other runs' gatherings: a rank's dump
  /// is kept only if it fits both in `max_dump_bytes` and in what is left of it.
  explicit DumpGathering(size_t max_dump_bytes = kMaxGatheredDumpBytes,
                         std::shared_ptr<ByteBudget> all_dumps = nullptr)
      : max_dump_bytes_(max_dump_bytes), all_dumps_(std::move(all_dumps)) {}

  /// A hang was declared in `round`: expect a report from each member until `deadline`. A
  /// gathering already under way for that round goes on.
  void start(int round, std::map<std::string, MemberRanks> members, TimePoint deadline);
  bool active() const { return round_.has_value(); }
  std::optional<int> round() const { return round_; }
  TimePoint deadline() const { return deadline_; }
  /// A member's report; ignored unless it is about this round, from a member. A second report
  /// of a member adds the dumps its ranks lacked (never takes one away). Ranks outside the
  /// member's own are dropped.
  void reported(const std::string& node_id, const proto::Collectives& report);
  /// Every member has reported.
  bool complete() const;
  /// Holds the round's failure report until the verdict (only the first one counts).
  void hold(const std::string& node_id, const FailureReport& report);
  /// The verdict over what came (members that sent nothing: their ranks have no dump), with the
  /// report held, if any; the gathering ends, and the verdict stays for the round's failure
  /// reports that come after it.
  HangVerdict finish();
  /// The verdict on `round`, once finished; null before, or for another round.
  const HangVerdict* verdict(int round) const;
  std::optional<std::pair<std::string, FailureReport>> take_held();
  /// The round ended (restart, new round) or the run did: forget it.
  void reset();
  /// About what the ranks' dumps gathered so far take (kMaxGatheredDumpBytes at most).
  size_t dump_bytes() const { return dump_bytes_; }

 private:
  void store_dump(int rank, const std::string& host, const proto::RankCollectives& collectives);
  /// Whether dumps_ may grow from `before` bytes to `after` (taking the growth from all_dumps_).
  bool make_room(size_t before, size_t after);
  /// Forgets the dumps and gives their bytes back.
  void drop_dumps();
  std::vector<std::string> nodes_running(const std::vector<int>& ranks) const;

  std::optional<int> round_;
  TimePoint deadline_{};
  std::map<std::string, MemberRanks> members_;
  std::set<std::string> answered_;  ///< members that sent a report
  std::map<int, RankDumpRecords> dumps_;
  size_t max_dump_bytes_;
  BudgetShare all_dumps_;  ///< of all gatherings' budget; without one only max_dump_bytes_
  size_t dump_bytes_ = 0;  ///< what dumps_ holds, about (all_dumps_ has taken as much)
  std::map<int, RankWithoutDump> without_dump_;
  std::optional<std::pair<std::string, FailureReport>> held_;
  std::optional<std::pair<int, HangVerdict>> verdict_;  ///< the last finished round's
};

}  // namespace cohort::rdzv
