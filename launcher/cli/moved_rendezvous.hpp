// Where a run's rendezvous is now that it may have moved to one of its --rdzv-fallback endpoints
// (the host of --rdzv-endpoint was lost): the first daemon, asked for the run's status with the
// run's token, that has it. An agent started again, or late, joins the run there instead of
// hosting (or waiting for) a fresh rendezvous at --rdzv-endpoint, which would start a second run
// under the same id; `cohort status` and `cohort stop` ask the daemon there. Blocking; main
// thread, before the command's own work.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/agent_config.hpp"

namespace cohort {

/// The index in `settings.fallbacks` of the first endpoint whose daemon has run `run_id` still
/// forming or running, unless a daemon answers at --rdzv-endpoint (before, or right after, that
/// fallback is found); each endpoint is given `timeout_ms` (connect and answer). nullopt when it
/// has not moved.
std::optional<size_t> find_moved_run(const RendezvousSettings& settings, const std::string& run_id,
                                     int timeout_ms);

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

}  // namespace cohort
