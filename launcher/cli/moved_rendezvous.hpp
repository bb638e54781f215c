// Where a run's rendezvous is now that it may have moved to one of its --rdzv-fallback endpoints
// (the host of --rdzv-endpoint was lost, or cut off and then followed the run): the first daemon,
// asked for the run's status with the run's token, that has it. An agent started again, or late,
// joins the run there instead of hosting (or waiting for) a fresh rendezvous at --rdzv-endpoint,
// which would start a second run under the same id; `cohort status` and `cohort stop` ask the
// daemon there. Blocking; main thread, before the command's own work.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/agent_config.hpp"

namespace cohort {

/// A run found at a fallback by find_moved_run.
struct MovedRun {
  size_t fallback = 0;         ///< its index in RendezvousSettings::fallbacks
  bool first_answers = false;  ///< the daemon at --rdzv-endpoint answers, without the run
};

/// The first endpoint in `settings.fallbacks` whose daemon has run `run_id` in a round, or still
/// forming while nothing answers at --rdzv-endpoint, unless the daemon there has the run forming
/// or running (asked before, and again right after, that fallback is found); each endpoint is
/// given `timeout_ms` (connect and answer). nullopt when it has not moved.
std::optional<MovedRun> find_moved_run(const RendezvousSettings& settings,
                                       const std::string& run_id, int timeout_ms);

/// What a command needs the daemon to have.
enum class RunWanted {
  Live,  ///< the run, forming or running (`cohort stop`)
  Any,   ///< the run in any phase; with no run id, a daemon that answers (`cohort status`)
};

/// `cohort status` and `cohort stop` with --rdzv-fallback LIST: `endpoint` becomes the first of
/// itself and LIST's endpoints whose daemon has run `run_id` as `wanted` says (said on stderr
/// when that is not `endpoint`), and stays `endpoint` when none has (its answer then says why).
/// False after saying on stderr why LIST is malformed.
bool follow_the_run(const std::string& command, std::string& endpoint, const std::string& list,
                    const std::string& run_id, const std::string& token, RunWanted wanted);

/// `cohort status --watch` with --rdzv-fallback LIST, when the daemon at `current` no longer shows
/// run `run_id` forming or running (or, with no run id, no longer answers): the first of
/// `endpoint` (--rdzv-endpoint) and LIST's endpoints, other than `current`, whose daemon has the
/// run forming or running (with no run id: that answers). Empty when none has, or LIST is empty
/// or malformed. Says nothing: the watch shows the move on its screen.
std::string run_elsewhere(const std::string& current, const std::string& endpoint,
                          const std::string& list, const std::string& run_id,
                          const std::string& token);

}  // namespace cohort
