// Whether an agent that has stopped ticking is dead to its workers or only starved: the keeper's
// judgement (pure) over what /proc says of the agent at its last tick and now. A stopped agent
// (SIGSTOP, a debugger) or one asleep without running or waiting to run (a deadlock) is killed at
// the stale limit; one that is runnable, or has waited on the run queue for a tenth of its
// silence, is starved by an overloaded machine and given up to kStarvedPatience stale limits.
// Free functions; the reading is the GroupKeeper's, in its own process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cohort {

/// What /proc says of a process's scheduling: its state, and its time on a CPU and waiting for one
/// (/proc/<pid>/schedstat, nanoseconds since it started).
struct ProcessVitals {
  char state = '?';
  uint64_t run_ns = 0;
  uint64_t runqueue_wait_ns = 0;
};

/// How many stale limits a starved agent is given before its workers are killed all the same.
constexpr int kStarvedPatience = 4;

/// Parses /proc/<pid>/schedstat ("run_ns wait_ns timeslices") into `vitals`; false if malformed.
bool parse_schedstat(std::string_view text, ProcessVitals& vitals);

/// The process's vitals now; nullopt when it is gone (or a zombie).
std::optional<ProcessVitals> read_process_vitals(pid_t pid);

/// "" while the keeper should wait; otherwise why the agent's workers are to be killed now. `then`
/// is the agent at its last tick, `now` at this moment (nullopt: gone), `silent` the time since
/// that tick.
std::string silence_verdict(const ProcessVitals& then, const std::optional<ProcessVitals>& now,
                            std::chrono::milliseconds silent,
                            std::chrono::milliseconds stale_limit);

}  // namespace cohort
