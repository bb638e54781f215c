#include "rendezvous/event_history.hpp"

#include <algorithm>

namespace cohort {

void EventHistory::run_created(const std::string& run) {
  auto found = runs_.find(run);
  if (found != runs_.end()) forget(found);
  runs_.try_emplace(run);
}

void EventHistory::add(const std::string& run, std::string line) {
  RunHistory& history = runs_[run];
  history.bytes += line.size();
  if (history.ended) ended_bytes_ += line.size();
  history.lines.push_back(std::move(line));
  while (history.lines.size() > 1 &&
         (history.lines.size() > limits_.events_per_run || history.bytes > limits_.bytes_per_run)) {
    history.bytes -= history.lines.front().size();
    if (history.ended) ended_bytes_ -= history.lines.front().size();
    history.lines.pop_front();
    ++history.dropped;
  }
  if (history.ended) trim_ended();
}

void EventHistory::run_ended(const std::string& run) {
  auto found = runs_.find(run);
  if (found == runs_.end() || found->second.ended) return;
  found->second.ended = true;
  ended_.push_back(run);
  ended_bytes_ += found->second.bytes;
  trim_ended();
}

const std::deque<std::string>& EventHistory::lines(const std::string& run) const {
  static const std::deque<std::string> kNone;
  auto found = runs_.find(run);
  return found == runs_.end() ? kNone : found->second.lines;
}

uint64_t EventHistory::dropped(const std::string& run) const {
  auto found = runs_.find(run);
  return found == runs_.end() ? 0 : found->second.dropped;
}

void EventHistory::forget(std::map<std::string, RunHistory>::iterator run) {
  if (run->second.ended) {
    ended_bytes_ -= run->second.bytes;
    ended_.erase(std::find(ended_.begin(), ended_.end(), run->first));
  }
  runs_.erase(run);
}

// The oldest ended runs go until both budgets hold; the newest ended run always stays.
void EventHistory::trim_ended() {
  while (ended_.size() > 1 &&
         (ended_.size() > limits_.ended_runs || ended_bytes_ > limits_.ended_bytes)) {
    forget(runs_.find(ended_.front()));
  }
}

}  // namespace cohort
