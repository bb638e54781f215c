// The daemon's Prometheus metrics: counters and histograms fed by its events (docs/EVENTS.md:
// rounds, restarts, failures, losses by reason, time to detect a loss, time to recover), and
// gauges read from its live state when /metrics is asked for (runs by phase, nodes by state,
// heartbeat ages, worker store connections, operations and budget). Owned by the daemon; io thread.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "observe/prometheus_text.hpp"

namespace cohort {

/// What the daemon holds right now, gathered for one /metrics answer.
struct MetricsSnapshot {
  struct Run {
    std::string id;
    std::string phase;  ///< "forming", "running", "completed" or "failed"
    int round = -1;
    int restarts_used = 0;
    int max_restarts = 0;
    size_t store_connections = 0;
    uint64_t store_operations = 0;  ///< in the current round's store
    int resumed_after = -1;         ///< RunState::resumed_after: -1, the run began here
    std::string moved_from;         ///< where that round ran, if elsewhere
  };
  struct Node {
    std::string run;
    std::string node;
    std::string state;  ///< pending, member, stopping, waiting, spare
    double heartbeat_age_seconds = 0;
  };
  std::vector<Run> runs;
  std::vector<Node> nodes;
  std::map<std::string, std::string> moved_runs;  ///< run id -> where its nodes all went
  size_t control_connections = 0;
  uint64_t control_connections_accepted = 0;  ///< since the start (agents, queries, strangers)
  uint64_t store_budget_bytes = 0;            ///< what all the stores may hold together
  uint64_t store_budget_used_bytes = 0;       ///< what they hold now
};

class DaemonMetrics {
 public:
  DaemonMetrics();

  /// One event the daemon wrote (the line's JSON object).
  void on_event(const nlohmann::json& event);
  /// The run is gone (its last node left): what was kept for it goes.
  void forget_run(const std::string& run) { recovering_since_ms_.erase(run); }
  /// The whole /metrics text.
  std::string render(const MetricsSnapshot& now) const;

  /// A loss reason as a label value from a fixed few: a reason's free text would make a new
  /// time series per distinct message.
  static std::string loss_class(const std::string& reason);

 private:
  uint64_t events_ = 0;
  uint64_t runs_created_ = 0;
  uint64_t rounds_started_ = 0;
  uint64_t restarts_ = 0;
  uint64_t worker_failures_ = 0;
  /// By outcome: completed, failed, stopped, abandoned.
  std::map<std::string, uint64_t> runs_ended_;
  std::map<std::string, uint64_t> nodes_lost_;  ///< by loss_class
  observe::Histogram detect_seconds_;
  observe::Histogram recover_seconds_;
  std::map<std::string, int64_t> recovering_since_ms_;  ///< by run: restart decided, no round yet
};

}  // namespace cohort
