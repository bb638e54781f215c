#include "rendezvous/run_progress.hpp"

#include <algorithm>
#include <cstdio>

#include "common/text.hpp"

namespace cohort::rdzv {
namespace {

std::string seconds_text(Ms duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

std::string ranks_text(int count) { return cat(count, count == 1 ? " rank" : " ranks"); }

}  // namespace

// `local`'s entry in `kept`, moved there from `known` with what earlier reports said of it, or a
// fresh one: a rank the report lists twice stays one rank.
RunProgress::Rank& RunProgress::keep_rank(std::map<int, Rank>& known, std::map<int, Rank>& kept,
                                          int local) {
  if (auto earlier = known.extract(local)) return kept.insert(std::move(earlier)).position->second;
  return kept[local];
}

void RunProgress::round_started(const std::vector<Assignment>& members) {
  nodes_.clear();
  hang_declared_ = false;
  hang_timeout_ = Ms(0);
  median_at_.reset();
  for (const Assignment& member : members) {
    round_ = member.round;
    NodeRanks& node = nodes_[member.node_id];
    node.address = member.address;
    node.base_rank = member.base_rank;
    node.local_world_size = member.local_world_size;
  }
}

std::vector<std::string> RunProgress::report(const std::string& node_id,
                                             const ProgressReport& report, TimePoint now) {
  auto found = nodes_.find(node_id);
  if (report.round != round_ || found == nodes_.end()) return {};
  NodeRanks& node = found->second;
  node.host = report.host;
  // The agent lists every rank of the node still running, each time with its last step and step
  // time, whether or not it stepped since: a rank the report leaves out has ended (on its own, or
  // failed), or never started. It is forgotten whole: it waits on nobody and is no hang's root
  // cause, whatever its last sign of life was, and its last step time is no longer the run's,
  // neither a straggler's nor part of the median and the slowest ranks.
  std::map<int, Rank> running;
  for (const RankReport& rank : report.ranks) {
    if (rank.local_rank < 0 || rank.local_rank >= node.local_world_size) continue;
    Rank& known = keep_rank(node.ranks, running, rank.local_rank);
    known.last_signal = now - rank.silent;
    if (rank.step) known.step = rank.step;
    if (rank.step_time) known.step_time = rank.step_time;
  }
  node.ranks = std::move(running);
  if (report.hang && !hang_declared_) {
    hang_declared_ = true;
    hang_timeout_ = report.hang_timeout;
  }
  return find_stragglers(node, report.straggler_factor_pct / 100.0, now);
}

// The node's ranks that have been slower than factor x the median for the window, not named yet.
std::vector<std::string> RunProgress::find_stragglers(NodeRanks& node, double factor,
                                                      TimePoint now) {
  std::optional<Ms> median = recent_median(now);
  std::vector<std::string> lines;
  for (auto& [local, rank] : node.ranks) {
    bool slow = median && rank.step_time && median->count() > 0 &&
                static_cast<double>(rank.step_time->count()) > factor * median->count();
    if (!slow) {
      rank.slow_since.reset();
      rank.named = false;
      continue;
    }
    if (!rank.slow_since) rank.slow_since = now;
    if (rank.named || now - *rank.slow_since < window_) continue;
    rank.named = true;
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2f",
                  static_cast<double>(rank.step_time->count()) / median->count());
    lines.push_back(cat("rank ", node.base_rank + local, " on ", node_name(node),
                        " is a straggler: ", seconds_text(*rank.step_time), " per step, ", ratio,
                        " x the run's median ", seconds_text(*median), ", for ",
                        seconds_text(std::chrono::duration_cast<Ms>(now - *rank.slow_since)),
                        " (--straggler-factor ", factor, ")"));
  }
  return lines;
}

std::optional<RunProgress::RankPlace> RunProgress::earliest_silent() const {
  std::optional<RankPlace> earliest;
  for (const auto& [id, node] : nodes_) {
    for (const auto& [local, rank] : node.ranks) {
      const auto& signal = rank.last_signal;
      if (!signal) continue;
      if (!earliest || *signal < *earliest->rank->last_signal)
        earliest = RankPlace{&id, &node, local, &rank};
    }
  }
  return earliest;
}

std::string RunProgress::silent_root_node() const {
  std::optional<RankPlace> earliest = earliest_silent();
  return earliest ? *earliest->node_id : std::string();
}

std::string RunProgress::silent_root_cause(TimePoint now) const {
  std::optional<RankPlace> earliest = earliest_silent();
  if (!earliest) return {};
  const NodeRanks* root_node = earliest->node;
  int root_local = earliest->local_rank;
  // Waiting: silent for a quarter of the hang timeout or more; the others still made progress.
  Ms waiting_after = hang_timeout_ / 4;
  int waited = 0, progressing = 0;
  for (const auto& [id, node] : nodes_) {
    for (const auto& [local, rank] : node.ranks) {
      const auto& signal = rank.last_signal;
      if (!signal || (&node == root_node && local == root_local)) continue;
      (now - *signal >= waiting_after ? waited : progressing) += 1;
    }
  }
  const Rank& root = *earliest->rank;
  std::string text = cat("rank ", root_node->base_rank + root_local, " on ", node_name(*root_node),
                         " stopped making progress ",
                         root.step ? cat("at step ", *root.step) : "before its first step");
  if (waited > 0) text += cat("; ", ranks_text(waited), " waited on it");
  if (progressing > 0) text += cat("; ", ranks_text(progressing), " still made progress");
  return text;
}

std::optional<Ms> RunProgress::median_step_time() const {
  std::vector<Ms> times;
  for (const auto& [id, node] : nodes_) {
    for (const auto& [local, rank] : node.ranks) {
      if (rank.step_time) times.push_back(*rank.step_time);
    }
  }
  if (times.empty()) return std::nullopt;
  // The lower median of an even count: of two ranks the upper one is the slow rank itself, which
  // no factor above 1 could ever name, and the mean of the two could not from a factor of 2 on
  // (a rank is less than twice its mean with another). A straggler is then slower than at least
  // half of the ranks, as with an odd count.
  auto middle = times.begin() + static_cast<std::ptrdiff_t>((times.size() - 1) / 2);
  std::nth_element(times.begin(), middle, times.end());
  return *middle;
}

std::optional<Ms> RunProgress::recent_median(TimePoint now) {
  if (!median_at_ || now - *median_at_ >= kMedianRefresh) {
    median_ = median_step_time();
    median_at_ = now;
  }
  return median_;
}

// Named only once chosen: a run of a million ranks copies five names, not a million.
std::vector<SlowRank> RunProgress::slowest(size_t count) const {
  struct Candidate {
    Ms step_time;
    int rank;
    const NodeRanks* node;
  };
  std::vector<Candidate> candidates;
  for (const auto& [id, node] : nodes_) {
    for (const auto& [local, rank] : node.ranks) {
      if (rank.step_time) {
        candidates.push_back({*rank.step_time, node.base_rank + local, &node});
      }
    }
  }
  auto slower = [](const Candidate& a, const Candidate& b) {
    return a.step_time != b.step_time ? a.step_time > b.step_time : a.rank < b.rank;
  };
  size_t shown = std::min(count, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(shown),
                    candidates.end(), slower);
  std::vector<SlowRank> ranks;
  for (size_t i = 0; i < shown; ++i) {
    ranks.push_back({candidates[i].rank, node_name(*candidates[i].node), candidates[i].step_time});
  }
  return ranks;
}

std::string RunProgress::node_name(const NodeRanks& node) {
  if (node.host.empty() || node.host == node.address) return node.address;
  return cat(node.host, " (", node.address, ")");
}

}  // namespace cohort::rdzv
