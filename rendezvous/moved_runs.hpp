// The runs whose nodes all left this daemon for another endpoint (--rdzv-fallback: a node that
// moved alone went back, or the host of the rendezvous followed the majority), so that `cohort
// status` here says where the run went instead of "no runs". Pure; owned by RendezvousDaemon,
// on its control thread. Holds the kMaxMovedRuns latest moves; a run that comes back is dropped.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <string>

namespace cohort::rdzv {

constexpr size_t kMaxMovedRuns = 64;

class MovedRuns {
 public:
  /// Run `run_id`'s last node here left for `endpoint` ("host:port").
  void moved(const std::string& run_id, const std::string& endpoint);
  /// The run is here again: it no longer counts as moved.
  void forget(const std::string& run_id);
  /// Run id -> the endpoint it moved to.
  const std::map<std::string, std::string>& runs() const { return to_; }

 private:
  std::map<std::string, std::string> to_;
  std::deque<std::string> order_;  ///< run ids, oldest move first
};

}  // namespace cohort::rdzv
