#include "rendezvous/dump_gathering.hpp"

#include <algorithm>

#include "common/text.hpp"

namespace cohort::rdzv {
namespace {

size_t call_bytes(const std::optional<proto::CollectiveCall>& call) {
  if (!call) return 0;
  size_t bytes = sizeof(*call) + call->op.size() + call->state.size();
  for (const auto& sizes : call->input_sizes) bytes += sizeof(sizes) + sizes.size() * 8;
  for (const auto& dtype : call->input_dtypes) bytes += sizeof(dtype) + dtype.size();
  return bytes;
}

// About what a rank's reduced dump takes in memory.
size_t reduced_dump_bytes(const proto::RankCollectives& dump) {
  size_t bytes = sizeof(dump) + dump.version.size() + dump.comm_lib_version.size();
  for (const proto::GroupProgress& group : dump.groups) {
    bytes += sizeof(group) + group.id.size() + group.desc.size() +
             call_bytes(group.first_incomplete) + call_bytes(group.last_call);
  }
  return bytes;
}

// Why no rank's dump could be used, as the ranks' reports said: the reasons, each with its ranks
// (the first few reasons; a dump refused for its size or shape must not read as none written).
std::string no_dumps_text(const std::map<int, RankWithoutDump>& without_dump) {
  constexpr size_t kReasonsShown = 3;
  std::map<std::string, std::vector<int>> ranks_by_reason;
  for (const auto& [rank, missing] : without_dump) ranks_by_reason[missing.reason].push_back(rank);
  if (ranks_by_reason.empty()) {
    return "no flight-recorder dumps (no NCCL process group, the recorder is off, or none was "
           "written in time)";
  }
  std::vector<std::string> reasons;
  for (const auto& [reason, ranks] : ranks_by_reason) {
    if (reasons.size() == kReasonsShown) break;
    reasons.push_back(
        cat(ranks.size() == 1 ? "rank " : "ranks ", rank_ranges_text(ranks), ": ", reason));
  }
  if (ranks_by_reason.size() > kReasonsShown) {
    reasons.push_back(cat(ranks_by_reason.size() - kReasonsShown, " other reasons"));
  }
  return "no flight-recorder dumps; " + join(reasons, "; ");
}

}  // namespace

void DumpGathering::start(int round, std::map<std::string, MemberRanks> members,
                          TimePoint deadline) {
  if (round_ == round || (verdict_ && verdict_->first == round)) return;
  reset();
  round_ = round;
  deadline_ = deadline;
  members_ = std::move(members);
}

void DumpGathering::reported(const std::string& node_id, const proto::Collectives& report) {
  auto member = members_.find(node_id);
  if (!round_ || report.round != *round_ || member == members_.end()) return;
  answered_.insert(node_id);  // a later report may still bring dumps its ranks lacked
  const MemberRanks& ranks = member->second;
  std::string host = report.host.empty() ? ranks.host : report.host;
  for (const proto::RankCollectivesReport& rank : report.ranks) {
    if (rank.rank < ranks.first || rank.rank >= ranks.first + ranks.count) continue;
    if (rank.error.empty()) {
      store_dump(rank.rank, host, rank.collectives);
    } else if (!dumps_.count(rank.rank)) {
      without_dump_[rank.rank] = RankWithoutDump{host, rank.error};
    }
  }
  for (int rank = ranks.first; rank < ranks.first + ranks.count; ++rank) {
    if (!dumps_.count(rank) && !without_dump_.count(rank)) {
      without_dump_[rank] = RankWithoutDump{host, "not in its node's report"};
    }
  }
}

void DumpGathering::store_dump(int rank, const std::string& host,
                               const proto::RankCollectives& collectives) {
  auto earlier = dumps_.find(rank);
  size_t freed = earlier == dumps_.end() ? 0 : reduced_dump_bytes(earlier->second.collectives);
  size_t bytes = reduced_dump_bytes(collectives);
  if (!make_room(dump_bytes_, dump_bytes_ - freed + bytes)) {
    if (earlier == dumps_.end()) {
      without_dump_[rank] =
          RankWithoutDump{host, dump_bytes_ - freed + bytes > max_dump_bytes_
                                    ? cat("dropped: the round's dumps hold ", dump_bytes_, " bytes")
                                    : cat("dropped: the daemon's gathered dumps hold ",
                                          all_dumps_.budget()->used(), " bytes")};
    }
    return;
  }
  dump_bytes_ = dump_bytes_ - freed + bytes;
  dumps_[rank] = RankDumpRecords{host, collectives};
  without_dump_.erase(rank);
}

bool DumpGathering::make_room(size_t before, size_t after) {
  if (after > max_dump_bytes_) return false;
  if (after > before) return all_dumps_.grow(after - before);
  all_dumps_.resize(after);
  return true;
}

void DumpGathering::drop_dumps() {
  dumps_.clear();
  dump_bytes_ = 0;
  all_dumps_.resize(0);
}

bool DumpGathering::complete() const {
  return std::all_of(members_.begin(), members_.end(),
                     [&](const auto& member) { return answered_.count(member.first) > 0; });
}

void DumpGathering::hold(const std::string& node_id, const FailureReport& report) {
  if (!held_) held_ = std::make_pair(node_id, report);
}

HangVerdict DumpGathering::finish() {
  for (const auto& [node_id, ranks] : members_) {
    if (answered_.count(node_id)) continue;
    for (int rank = ranks.first; rank < ranks.first + ranks.count; ++rank) {
      without_dump_[rank] = RankWithoutDump{ranks.host, "its node sent no dumps in time"};
    }
  }
  HangVerdict verdict;
  verdict.attribution = attribute_collectives(dumps_, without_dump_);
  verdict.text = verdict.attribution.text;
  if (const auto& primary = verdict.attribution.primary) {
    const GroupAttribution& group = verdict.attribution.groups[*primary];
    verdict.attributed = group.divergence == Divergence::kMissing ||
                         group.divergence == Divergence::kDesync ||
                         group.divergence == Divergence::kStuck;
    verdict.culprit_nodes = nodes_running(group.culprits);
  }
  verdict.had_dumps = !dumps_.empty();
  if (dumps_.empty()) verdict.text = no_dumps_text(without_dump_);
  verdict_ = std::make_pair(*round_, verdict);
  round_.reset();
  drop_dumps();  // the verdict is what stays
  without_dump_.clear();
  return verdict;
}

// The members that run these ranks, each once, in the order of the ranks: a search by rank
// over the members' ranges, not a scan of every member for every rank.
std::vector<std::string> DumpGathering::nodes_running(const std::vector<int>& ranks) const {
  std::map<int, const std::string*> by_first;  // first rank -> node id
  for (const auto& [node_id, member] : members_) by_first[member.first] = &node_id;
  std::vector<std::string> nodes;
  std::set<const std::string*> named;
  for (int rank : ranks) {
    auto after = by_first.upper_bound(rank);
    if (after == by_first.begin()) continue;
    const std::string* node_id = std::prev(after)->second;
    const MemberRanks& member = members_.at(*node_id);
    if (rank < member.first + member.count && named.insert(node_id).second) {
      nodes.push_back(*node_id);
    }
  }
  return nodes;
}

const HangVerdict* DumpGathering::verdict(int round) const {
  return verdict_ && verdict_->first == round ? &verdict_->second : nullptr;
}

std::optional<std::pair<std::string, FailureReport>> DumpGathering::take_held() {
  auto held = std::move(held_);
  held_.reset();
  return held;
}

void DumpGathering::reset() {
  round_.reset();
  members_.clear();
  answered_.clear();
  drop_dumps();
  without_dump_.clear();
  held_.reset();
  verdict_.reset();
}

}  // namespace cohort::rdzv
