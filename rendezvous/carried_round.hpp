// The round a restarted daemon did not see end. Agents that rejoin say which round they were in
// and, when their workers ended while the daemon was down, how (the report it never read). Once
// one of them carries an outcome, the daemon waits (up to a deadline) for every node of that round
// to come back, then rules: the run completed (every node succeeded), a worker failed (the first
// failure heard, to be counted against the budget), or a new round is needed (a node was still
// running or never came back). Pure, time passed in; owned by the RunState; one thread.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "rendezvous/rendezvous_types.hpp"

namespace cohort::rdzv {

class CarriedRound {
 public:
  enum class Verdict { Completed, Failed, NewRound };

  /// A node rejoined with `last_round` (and perhaps an outcome); `wait` bounds the wait for the
  /// rest of its round, from the first outcome heard.
  void rejoined(const NodeInfo& node, TimePoint now, Ms wait);
  /// A node that rejoined with its workers running reports how they ended, in the old round.
  void reported(const std::string& node_id, const CarriedOutcome& outcome, TimePoint now, Ms wait);
  /// The node's connection closed before the ruling: it is no longer back.
  void forget(const std::string& node_id) { back_.erase(node_id); }

  /// An outcome was heard and no ruling made yet: the daemon must not form a round.
  bool pending() const { return round_ >= 0 && !ruled_; }
  /// Pending, and every node of the round is back or the deadline passed.
  bool ready(TimePoint now) const;
  std::optional<TimePoint> deadline() const;
  /// The ruling (once ready); after it, pending() is false for good.
  Verdict rule();
  /// For Verdict::Failed: the failure to apply.
  const FailureReport& failure() const { return *failure_; }
  int round() const { return round_; }

 private:
  struct Back {
    int round = -1;
    int round_nodes = 0;
    bool succeeded = false;
  };
  void heard(const CarriedOutcome& outcome, TimePoint now, Ms wait);
  int back_in_round(bool succeeded_only) const;
  int group_size() const;

  std::map<std::string, Back> back_;  ///< every rejoined node, by id
  int round_ = -1;                    ///< the round of the outcomes; -1 before the first
  TimePoint deadline_{};
  std::optional<FailureReport> failure_;
  bool ruled_ = false;
};

}  // namespace cohort::rdzv
