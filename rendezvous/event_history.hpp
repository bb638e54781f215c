// The events the daemon holds for each run, as their log lines, oldest first: what a run's
// timeline page draws and `cohort status --events` prints. Bounded: a run keeps its newest
// events within Limits (older ones are dropped and counted), the live runs together within a
// byte budget (the largest history gives up its oldest lines first), and an ended run's history
// is kept for a while (the most recent ended runs, within a byte budget) so its page still
// answers.
// Owned by the rendezvous daemon; io thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace cohort {

class EventHistory {
 public:
  struct Limits {
    size_t events_per_run = 10000;
    size_t bytes_per_run = 16 << 20;
    size_t live_bytes = 256 << 20;  ///< all live runs' lines together
    size_t ended_runs = 64;
    size_t ended_bytes = 64 << 20;  ///< all ended runs' lines together
  };

  explicit EventHistory(Limits limits) : limits_(limits) {}
  EventHistory() : EventHistory(Limits{}) {}

  /// A run starts (again): a history left from an ended run of the same id is forgotten.
  void run_created(const std::string& run);
  void add(const std::string& run, std::string line);
  /// The run ended: its history is kept among the ended runs' (the oldest of those go first).
  void run_ended(const std::string& run);

  bool has_run(const std::string& run) const { return runs_.count(run) > 0; }
  /// The run's lines, oldest first; empty for an unknown run.
  const std::deque<std::string>& lines(const std::string& run) const;
  /// How many of the run's events were dropped to stay within the limits.
  uint64_t dropped(const std::string& run) const;
  size_t run_count() const { return runs_.size(); }
  /// The ended runs it still holds, the last to end first.
  std::vector<std::string> ended_runs() const { return {ended_.rbegin(), ended_.rend()}; }

 private:
  struct RunHistory {
    std::deque<std::string> lines;
    size_t bytes = 0;
    uint64_t dropped = 0;
    bool ended = false;
  };
  void drop_oldest(RunHistory& history);
  void forget(std::map<std::string, RunHistory>::iterator run);
  void trim_live();
  void trim_ended();

  Limits limits_;
  std::map<std::string, RunHistory> runs_;
  std::deque<std::string> ended_;  ///< ended runs, the first to end first
  size_t ended_bytes_ = 0;
  size_t live_bytes_ = 0;
};

}  // namespace cohort
