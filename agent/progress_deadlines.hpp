// Hang detection's pure core: for each worker of a group, when it last gave a sign of life (a
// heartbeat, an output line) and the step it last reported, and from that its deadline: the
// start plus the first-signal allowance until its first signal, then the last signal plus the
// timeout. Time is passed in; no I/O. Owned by WorkerGroup, which arms one timer at
// next_deadline(); io thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/clock.hpp"

namespace cohort {

struct HangSettings {
  SteadyDuration timeout{};        ///< silence after a signal that makes a worker hung; 0: off
  SteadyDuration first_timeout{};  ///< silence from the start before the first signal
  /// How long a hang waits for the NCCL flight recorder's dumps asked for (0: not at all).
  SteadyDuration dump_timeout = std::chrono::seconds(10);
  bool enabled() const { return timeout > SteadyDuration::zero(); }
};

/// What is known of one worker's progress.
struct ProgressRecord {
  SteadyTime started{};
  std::optional<SteadyTime> last_signal;  ///< none before the first signal
  std::optional<int64_t> step;            ///< the last step reported by a heartbeat
  bool watched = false;                   ///< false once it exited (or before it started)
};

class ProgressDeadlines {
 public:
  explicit ProgressDeadlines(HangSettings settings) : settings_(settings) {}

  const HangSettings& settings() const { return settings_; }
  /// The worker (0, 1, ...) started at `now`: its first-signal allowance begins.
  void started(size_t worker, SteadyTime now);
  /// A sign of life; `step` when it reported one. Returns true for the worker's first: its
  /// deadline moved earlier (from the first-signal allowance to the timeout), later for others.
  bool signal(size_t worker, SteadyTime now, std::optional<int64_t> step = std::nullopt);
  /// No longer watched (it exited, or the group is stopping).
  void forget(size_t worker);
  void forget_all();
  /// The agent and its workers were stopped together for `paused` (Ctrl-Z): every watched
  /// worker's time so far moves that much later, so the pause counts as no one's silence.
  void postpone(SteadyDuration paused);

  /// When the next worker runs out of time, if any is watched.
  std::optional<SteadyTime> next_deadline() const;
  /// The watched worker whose deadline passed first, if any passed by `now`.
  std::optional<size_t> first_hung(SteadyTime now) const;
  /// How long `worker` has been silent at `now` (since its start before its first signal).
  SteadyDuration silent_for(size_t worker, SteadyTime now) const;
  const ProgressRecord& record(size_t worker) const { return records_.at(worker); }

 private:
  SteadyTime deadline(const ProgressRecord& record) const;

  HangSettings settings_;
  std::vector<ProgressRecord> records_;
};

}  // namespace cohort
