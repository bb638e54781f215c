#include "rendezvous/moved_runs.hpp"

#include <algorithm>

namespace cohort::rdzv {

void MovedRuns::moved(const std::string& run_id, const std::string& endpoint) {
  forget(run_id);
  if (order_.size() == kMaxMovedRuns) {
    to_.erase(order_.front());
    order_.pop_front();
  }
  to_[run_id] = endpoint;
  order_.push_back(run_id);
}

void MovedRuns::forget(const std::string& run_id) {
  if (to_.erase(run_id) == 0) return;
  order_.erase(std::find(order_.begin(), order_.end(), run_id));
}

}  // namespace cohort::rdzv
