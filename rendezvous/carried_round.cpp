#include "rendezvous/carried_round.hpp"

#include <algorithm>

namespace cohort::rdzv {

void CarriedRound::rejoined(const NodeInfo& node, TimePoint now, Ms wait) {
  if (ruled_ || node.last_round < 0) return;
  back_[node.node_id] = {node.last_round, node.last_round_nodes, false};
  if (node.outcome && node.outcome->round == node.last_round) {
    reported(node.node_id, *node.outcome, now, wait);
  }
}

void CarriedRound::reported(const std::string& node_id, const CarriedOutcome& outcome,
                            TimePoint now, Ms wait) {
  auto back = back_.find(node_id);
  if (ruled_ || back == back_.end() || back->second.round != outcome.round) return;
  back->second.succeeded = !outcome.failure;
  heard(outcome, now, wait);
}

// The newest round an outcome is heard of is the one to rule on.
void CarriedRound::heard(const CarriedOutcome& outcome, TimePoint now, Ms wait) {
  if (outcome.round < round_) return;
  if (outcome.round > round_) {
    round_ = outcome.round;
    deadline_ = now + wait;
    failure_.reset();
  }
  if (outcome.failure && !failure_) failure_ = outcome.failure;
}

int CarriedRound::back_in_round(bool succeeded_only) const {
  return static_cast<int>(std::count_if(back_.begin(), back_.end(), [&](const auto& entry) {
    return entry.second.round == round_ && (entry.second.succeeded || !succeeded_only);
  }));
}

// What the nodes of the round said its size was (they all heard the same).
int CarriedRound::group_size() const {
  int size = 0;
  for (const auto& [id, back] : back_) {
    if (back.round == round_) size = std::max(size, back.round_nodes);
  }
  return size;
}

bool CarriedRound::ready(TimePoint now) const {
  return pending() && (back_in_round(false) >= group_size() || now >= deadline_);
}

std::optional<TimePoint> CarriedRound::deadline() const {
  if (!pending()) return std::nullopt;
  return deadline_;
}

CarriedRound::Verdict CarriedRound::rule() {
  ruled_ = true;
  if (failure_) return Verdict::Failed;
  if (back_in_round(true) >= group_size()) return Verdict::Completed;
  return Verdict::NewRound;
}

}  // namespace cohort::rdzv
