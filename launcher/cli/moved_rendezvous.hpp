// Whether the run already moved to one of its --rdzv-fallback endpoints before this agent
// started (a node started again, or late, after the host of --rdzv-endpoint was lost): the
// daemon there, asked for the run's status with the run's token, has it and it has not ended,
// and the one at --rdzv-endpoint has not.
// Such an agent joins it there instead of hosting (or waiting for) a fresh rendezvous at
// --rdzv-endpoint, which would start a second run under the same id. Blocking; main thread, at
// start.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/agent_config.hpp"

namespace cohort {

/// "host:port", with brackets around an IPv6 address.
std::string endpoint_text(const std::string& host, uint16_t port);

/// The index in `settings.fallbacks` of the first endpoint whose daemon has run `run_id` still
/// forming or running, unless --rdzv-endpoint's daemon has it; each endpoint is given
/// `timeout_ms` (connect and answer). nullopt when it has not moved.
std::optional<size_t> find_moved_run(const RendezvousSettings& settings, const std::string& run_id,
                                     int timeout_ms);

}  // namespace cohort
