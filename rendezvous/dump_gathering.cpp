#include "rendezvous/dump_gathering.hpp"

#include <algorithm>

namespace cohort::rdzv {

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
      dumps_[rank.rank] = RankDumpRecords{host, rank.collectives};
      without_dump_.erase(rank.rank);
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
    for (int rank : group.culprits) {
      for (const auto& [node_id, ranks] : members_) {
        bool runs_it = rank >= ranks.first && rank < ranks.first + ranks.count;
        if (runs_it && std::find(verdict.culprit_nodes.begin(), verdict.culprit_nodes.end(),
                                 node_id) == verdict.culprit_nodes.end()) {
          verdict.culprit_nodes.push_back(node_id);
        }
      }
    }
  }
  verdict.had_dumps = !dumps_.empty();
  if (dumps_.empty()) {
    verdict.text =
        "no flight-recorder dumps (no NCCL process group, the recorder is off, or "
        "none was written in time)";
  }
  verdict_ = std::make_pair(*round_, verdict);
  round_.reset();
  return verdict;
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
  dumps_.clear();
  without_dump_.clear();
  held_.reset();
  verdict_.reset();
}

}  // namespace cohort::rdzv
