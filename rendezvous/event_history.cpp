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
  (history.ended ? ended_bytes_ : live_bytes_) += line.size();
  history.lines.push_back(std::move(line));
  while (history.lines.size() > 1 &&
         (history.lines.size() > limits_.events_per_run || history.bytes > limits_.bytes_per_run)) {
    drop_oldest(history);
  }
  if (history.ended) {
    trim_ended();
  } else {
    trim_live();
  }
}

void EventHistory::run_ended(const std::string& run) {
  auto found = runs_.find(run);
  if (found == runs_.end() || found->second.ended) return;
  found->second.ended = true;
  ended_.push_back(run);
  live_bytes_ -= found->second.bytes;
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

void EventHistory::drop_oldest(RunHistory& history) {
  size_t size = history.lines.front().size();
  history.bytes -= size;
  (history.ended ? ended_bytes_ : live_bytes_) -= size;
  history.lines.pop_front();
  ++history.dropped;
}

void EventHistory::forget(std::map<std::string, RunHistory>::iterator run) {
  if (run->second.ended) {
    ended_bytes_ -= run->second.bytes;
    ended_.erase(std::find(ended_.begin(), ended_.end(), run->first));
  } else {
    live_bytes_ -= run->second.bytes;
  }
  runs_.erase(run);
}

// Over the live runs' budget, the largest live history gives up its oldest line, until the
// budget holds or no run has more than its newest line: a run that floods its history cannot
// take a quiet run's.
void EventHistory::trim_live() {
  while (live_bytes_ > limits_.live_bytes) {
    RunHistory* largest = nullptr;
    for (auto& [name, history] : runs_) {
      if (!history.ended && (largest == nullptr || history.bytes > largest->bytes)) {
        largest = &history;
      }
    }
    if (largest == nullptr || largest->lines.size() <= 1) return;
    drop_oldest(*largest);
  }
}

// The oldest ended runs go until both budgets hold; the newest ended run always stays.
void EventHistory::trim_ended() {
  while (ended_.size() > 1 &&
         (ended_.size() > limits_.ended_runs || ended_bytes_ > limits_.ended_bytes)) {
    forget(runs_.find(ended_.front()));
  }
}

}  // namespace cohort
