// --rdzv-fallback HOST[:PORT],...: the endpoints a run's rendezvous moves to, in order, as
// `cohort run` (rendezvous_plan.*), `cohort status` and `cohort stop` (moved_rendezvous.*) read
// them. Pure; main thread, at start.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/host_port.hpp"

namespace cohort {

/// --rdzv-fallback takes at most this many endpoints.
constexpr size_t kMaxFallbacks = 8;

/// The endpoints of `list` in order, each with `default_port` (--rdzv-endpoint's) unless it names
/// one; nullopt with `problem` naming the flag when an item is malformed or has port 0, or there
/// are more than kMaxFallbacks.
std::optional<std::vector<HostPort>> parse_fallback_list(const std::string& list,
                                                         uint16_t default_port,
                                                         std::string& problem);

}  // namespace cohort
