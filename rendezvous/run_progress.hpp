// What a run's nodes report of their workers' progress, and what follows from it: the rank that
// went silent first across every node (the root cause of a hang, and how many ranks waited on
// it), the run's median step time and its slowest ranks, and ranks that stay slower than the
// median by the straggler factor for the straggler window. Agents send ages measured on their own
// steady clock (never wall times), which the daemon turns into its own time points on receipt,
// so clocks that differ between hosts do not matter. Pure: time is passed in. Owned by RunState;
// one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/rendezvous_types.hpp"

namespace cohort::rdzv {

/// How long a rank must stay slower than the median by the straggler factor before it is named,
/// unless COHORT_STRAGGLER_WINDOW_MS says otherwise (tests shorten it).
constexpr Ms kStragglerWindow{60000};
/// How many ranks `cohort status` lists as the slowest.
constexpr size_t kSlowestShown = 5;
/// How stale the median that reports are compared with may get: computing it walks every rank of
/// the run, which a report from each of thousands of nodes must not pay each time.
constexpr Ms kMedianRefresh{1000};

struct RankReport {
  int local_rank = 0;
  Ms silent{0};  ///< since its last sign of life, when the agent sent the report
  std::optional<int64_t> step;
  std::optional<Ms> step_time;  ///< the median of its last steps' durations
};
struct ProgressReport {
  int round = 0;
  bool hang = false;  ///< the node declared one of these ranks hung
  Ms hang_timeout{0};
  int straggler_factor_pct = 150;
  std::string host;
  std::vector<RankReport> ranks;
};
struct SlowRank {
  int rank = 0;
  std::string node;  ///< "host (address)"
  Ms step_time{0};
};

class RunProgress {
 public:
  explicit RunProgress(Ms straggler_window = kStragglerWindow) : window_(straggler_window) {}
  void set_straggler_window(Ms window) { window_ = window; }

  /// A round formed: what the last one reported is forgotten; only its members may report.
  void round_started(const std::vector<Assignment>& members);
  void node_gone(const std::string& node_id) { nodes_.erase(node_id); }
  /// A member's report, received at `now`. Returns the stragglers it shows for the first time
  /// (a line each, to log). Reports about another round, or from a non-member, are ignored, and
  /// so are ranks beyond the node's local world size. A report lists every rank of the node
  /// still running: one it leaves out (it ended) is forgotten, no longer a hang's root cause nor
  /// a straggler, nor counted in the median or the slowest ranks.
  std::vector<std::string> report(const std::string& node_id, const ProgressReport& report,
                                  TimePoint now);
  /// A member declared a hang in this round.
  bool hang_declared() const { return hang_declared_; }
  /// "rank 13 on node-b (10.0.0.3) stopped making progress at step 4120; 31 ranks waited on it":
  /// the rank whose last sign of life is the earliest of the round; empty when none reported.
  std::string silent_root_cause(TimePoint now) const;
  /// The node id of that rank's node; empty when none reported.
  std::string silent_root_node() const;
  /// The median of every rank's step time (the lower of the middle two of an even count);
  /// nullopt when none reported one.
  std::optional<Ms> median_step_time() const;
  /// The ranks with the longest step times, slowest first.
  std::vector<SlowRank> slowest(size_t count = kSlowestShown) const;

 private:
  struct Rank {
    std::optional<TimePoint> last_signal;
    std::optional<int64_t> step;
    std::optional<Ms> step_time;
    std::optional<TimePoint> slow_since;  ///< slower than the median by the factor since
    bool named = false;                   ///< its straggling was logged
  };
  struct NodeRanks {
    std::string address;
    std::string host;
    int base_rank = 0;
    int local_world_size = 0;
    /// By local rank, those reported: what the node said, not what it may run.
    std::map<int, Rank> ranks;
  };

  struct RankPlace {
    const std::string* node_id;
    const NodeRanks* node;
    int local_rank;
    const Rank* rank;
  };

  /// The rank whose last sign of life is the earliest of the round.
  std::optional<RankPlace> earliest_silent() const;
  static std::string node_name(const NodeRanks& node);
  static Rank& keep_rank(std::map<int, Rank>& known, std::map<int, Rank>& kept, int local);
  std::vector<std::string> find_stragglers(NodeRanks& node, double factor, TimePoint now);
  /// median_step_time(), computed again once kMedianRefresh old.
  std::optional<Ms> recent_median(TimePoint now);

  Ms window_;
  int round_ = -1;
  std::map<std::string, NodeRanks> nodes_;
  bool hang_declared_ = false;
  Ms hang_timeout_{0};                  ///< the declaring node's
  std::optional<TimePoint> median_at_;  ///< when median_ was computed; nullopt: not since reset
  std::optional<Ms> median_;
};

}  // namespace cohort::rdzv
