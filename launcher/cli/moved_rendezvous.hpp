// Whether the run already moved to one of its --rdzv-fallback endpoints before this agent
// started (a node started again, or late, after the host of --rdzv-endpoint was lost): the
// daemon there, asked for the run's status with the run's token, has it and it has not ended.
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

/// The index in `fallbacks` of the first endpoint whose daemon has run `run_id` still forming or
/// running; each endpoint is given `timeout_ms` (connect and answer). nullopt when none has.
std::optional<size_t> find_moved_run(const std::vector<FallbackEndpoint>& fallbacks,
                                     const std::string& run_id, const std::string& token,
                                     int timeout_ms);

}  // namespace cohort
