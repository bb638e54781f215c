#include "agent/flight_recorder_dumps.hpp"

#include <cstdio>

namespace cohort {

DumpWait::DumpWait(std::vector<FlightRecorderDump> asked, SteadyTime asked_at,
                   SteadyDuration timeout, SteadyDuration settle)
    : dumps_(std::move(asked)),
      same_since_(dumps_.size(), asked_at),
      deadline_(asked_at + timeout),
      settle_(settle) {
  for (auto& dump : dumps_) {
    dump.bytes.reset();
    dump.complete = false;
  }
}

void DumpWait::observe(size_t index, std::optional<uint64_t> bytes, SteadyTime now) {
  FlightRecorderDump& dump = dumps_.at(index);
  if (bytes != dump.bytes) {
    dump.bytes = bytes;
    same_since_[index] = now;
  }
  dump.complete = bytes && *bytes > 0 && now - same_since_[index] >= settle_;
}

bool DumpWait::finished(SteadyTime now) const {
  if (now >= deadline_) return true;
  for (const auto& dump : dumps_) {
    if (!dump.complete) return false;
  }
  return true;
}

void DumpWait::postpone(SteadyDuration paused) {
  deadline_ += paused;
  for (SteadyTime& since : same_since_) since += paused;
}

std::string dump_line(const FlightRecorderDump& dump, std::chrono::milliseconds waited, bool kept) {
  std::string rank = "rank " + std::to_string(dump.rank);
  if (!dump.bytes || *dump.bytes == 0)
    return rank + " wrote no dump within " + dump_wait_seconds(waited) + " s";
  std::string line = "flight recorder dump of " + rank + ": " + dump.path + " (" +
                     std::to_string(*dump.bytes) + " bytes";
  if (!dump.complete) line += ", still being written after " + dump_wait_seconds(waited) + " s";
  line += ")";
  if (!kept) line += " (removed at exit; --log-dir keeps it)";
  return line;
}

std::string dump_wait_seconds(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

}  // namespace cohort
