#include "agent/progress_deadlines.hpp"

namespace cohort {

void ProgressDeadlines::started(size_t worker, SteadyTime now) {
  if (worker >= records_.size()) records_.resize(worker + 1);
  ProgressRecord& record = records_.at(worker);
  record = ProgressRecord{};
  record.started = now;
  record.watched = settings_.enabled();
}

bool ProgressDeadlines::signal(size_t worker, SteadyTime now, std::optional<int64_t> step) {
  if (worker >= records_.size()) return false;
  ProgressRecord& record = records_[worker];
  bool first = !record.last_signal;
  record.last_signal = now;
  if (step) record.step = step;
  return first;
}

void ProgressDeadlines::forget(size_t worker) {
  if (worker < records_.size()) records_[worker].watched = false;
}

void ProgressDeadlines::forget_all() {
  for (ProgressRecord& record : records_) record.watched = false;
}

void ProgressDeadlines::postpone(SteadyDuration paused) {
  for (ProgressRecord& record : records_) {
    if (!record.watched) continue;
    record.started += paused;
    if (record.last_signal) *record.last_signal += paused;
  }
}

SteadyTime ProgressDeadlines::deadline(const ProgressRecord& record) const {
  if (record.last_signal) return *record.last_signal + settings_.timeout;
  return record.started + settings_.first_timeout;
}

std::optional<SteadyTime> ProgressDeadlines::next_deadline() const {
  std::optional<SteadyTime> earliest;
  for (const ProgressRecord& record : records_) {
    if (!record.watched) continue;
    SteadyTime due = deadline(record);
    if (!earliest || due < *earliest) earliest = due;
  }
  return earliest;
}

std::optional<size_t> ProgressDeadlines::first_hung(SteadyTime now) const {
  std::optional<size_t> first;
  for (size_t i = 0; i < records_.size(); ++i) {
    const ProgressRecord& record = records_[i];
    if (!record.watched || deadline(record) > now) continue;
    if (!first || deadline(record) < deadline(records_[*first])) first = i;
  }
  return first;
}

SteadyDuration ProgressDeadlines::silent_for(size_t worker, SteadyTime now) const {
  const ProgressRecord& record = records_.at(worker);
  return now - record.last_signal.value_or(record.started);
}

}  // namespace cohort
