#include "rendezvous/ended_runs.hpp"

#include <algorithm>
#include <chrono>

#include "common/text.hpp"

namespace cohort::rdzv {

void EndedRuns::ended(const std::string& run_id, TimePoint at, std::optional<proto::Stop> stop) {
  if (stop) {
    stop->summary.clear();  // the members' report; the reason says enough to a late node
    if (stop->reason.size() > proto::kMaxFailureTextBytes) {
      stop->reason.resize(proto::kMaxFailureTextBytes);
    }
  }
  endings_[run_id] = Ending{at, std::move(stop)};
  if (endings_.size() > kMaxEndedRuns) forget_oldest();
}

std::vector<proto::ControlMessage> EndedRuns::late_join(const std::string& run_id,
                                                        std::optional<TimePoint> started) const {
  auto found = endings_.find(run_id);
  if (!started || found == endings_.end() || *started >= found->second.at) return {};
  const Ending& ending = found->second;
  double after_start = std::chrono::duration_cast<Ms>(ending.at - *started).count() / 1000.0;
  std::string when = cat(after_start, " s after this node started, before it joined");
  if (!ending.stop) {
    return {proto::Notice{cat("run '", run_id, "' completed ", when)}, proto::Complete{}};
  }
  proto::Stop stop = *ending.stop;
  stop.reason = cat(stop.reason, " (the run ended ", when, ")");
  return {stop};
}

void EndedRuns::forget_oldest() {
  auto oldest =
      std::min_element(endings_.begin(), endings_.end(),
                       [](const auto& a, const auto& b) { return a.second.at < b.second.at; });
  endings_.erase(oldest);
}

}  // namespace cohort::rdzv
