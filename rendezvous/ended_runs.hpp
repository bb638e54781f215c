// The runs a daemon has seen end, so that an agent that was started before its run ended but
// joins only afterwards (a slow start, a long health check, a lost connection) hears how the run
// ended instead of opening a fresh run under the same id and training on its own. An agent
// started after the end is a new job reusing the id and joins as usual. Pure, with time passed
// in; owned by RendezvousDaemon, on its control thread. Holds the kMaxEndedRuns latest endings.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proto/control_messages.hpp"
#include "rendezvous/rendezvous_types.hpp"

namespace cohort::rdzv {

constexpr size_t kMaxEndedRuns = 1024;

class EndedRuns {
 public:
  /// `run_id` ended at `at`: stopped or failed with `stop`, or, without one, completed.
  void ended(const std::string& run_id, TimePoint at, std::optional<proto::Stop> stop);
  /// What an agent that `started` at that time hears, in order, when it joins `run_id`: when it
  /// started before the run ended, what the members heard (the Stop; for a completed run a
  /// Notice that it came late, then Complete); nothing when it joins as usual (an unknown run,
  /// an agent started after the end or of unknown age).
  std::vector<proto::ControlMessage> late_join(const std::string& run_id,
                                               std::optional<TimePoint> started) const;
  /// `run_id` ended here (and is still remembered).
  bool has(const std::string& run_id) const { return endings_.count(run_id) > 0; }
  size_t size() const { return endings_.size(); }

 private:
  struct Ending {
    TimePoint at;
    std::optional<proto::Stop> stop;
  };
  void forget_oldest();

  std::map<std::string, Ending> endings_;
};

}  // namespace cohort::rdzv
