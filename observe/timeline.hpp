// One run's history, as the timeline page draws it: rounds (who took part, from when to when),
// marks (failures, losses, hangs, exclusions, restarts, scale-ups), recovery times (from a
// failure or a member's loss, never from a scale-up), each node's label (its host and address) and
// the run's root cause, read from the run's events (docs/EVENTS.md). Pure: events and the current
// time in, a Timeline out; any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

namespace cohort::observe {

struct TimelineMember {
  std::string node;
  int group_rank = -1;
  int local_world_size = 0;
};

struct TimelineRound {
  int round = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;  ///< the next round's start, the run's end, or now
  int world_size = 0;
  std::vector<TimelineMember> members;
};

struct TimelineMark {
  enum class Kind { Failure, Lost, Hang, Straggler, Unhealthy, Excluded, Restart, ScaleUp, End };
  Kind kind;
  int64_t t_ms = 0;
  std::string node;  ///< empty: the whole run
  std::string text;  ///< what the event said, for the mark's tooltip
};

struct Recovery {
  int64_t from_ms = 0;  ///< the restart decided (or the member of the round lost)
  int64_t to_ms = 0;    ///< the next round started
};

struct Timeline {
  std::string run_id;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  std::vector<std::string> nodes;                ///< in order of first appearance
  std::unordered_map<std::string, size_t> rows;  ///< by node: its index in `nodes`
  std::vector<std::string> labels;  ///< by node: "host (address)", the address, else the id
  std::vector<TimelineRound> rounds;
  std::vector<TimelineMark> marks;
  std::vector<Recovery> recoveries;
  /// "running", "completed", "failed", "stopped" or "abandoned" (its nodes all went first)
  std::string outcome;
  std::string root_cause;  ///< the last failure's or the end's reason, one line; "" if none
  int scale_ups = 0;       ///< new rounds because nodes joined (no recovery)
  /// The daemon took the run over (its first round.started says so): "resumed here after round
  /// 3, which ran at gpu-1:29400 (--rdzv-fallback)"; "" for a run that began there.
  std::string resumed;
};

/// Reads events of one run (in the order written; unknown events are skipped).
Timeline build_timeline(const std::string& run_id, const std::vector<nlohmann::json>& events,
                        int64_t now_ms);

}  // namespace cohort::observe
