// `cohort status --watch`: asks the daemon again every interval and redraws one compact screen
// (runs with phase, round, nodes and restarts, the last failure on lines of its own, wrapped to
// the terminal; each node with its state, rank, workers and heartbeat age) until Ctrl-C, like
// `watch` or `top`. The screen is a pure function of the reply; the loop blocks the main thread
// between requests.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launcher/cli/status_command.hpp"

namespace cohort {

/// The screen for one reply (or for `problem` when there was none), `width` columns wide at
/// most, headed by the endpoint, the interval and the wall-clock time `clock`.
std::string watch_screen(const StatusFetch& fetched, const StatusQuery& query,
                         std::chrono::milliseconds interval, const std::string& clock, int width);

/// `lead` then `text` in lines of at most `width` columns (0: one line), broken at spaces, the
/// lines after the first indented as wide as `lead`; at most `max_lines`, the last ending in
/// "..." when the text was cut. Line breaks and bytes a terminal could act on are made harmless.
std::vector<std::string> wrap_text(const std::string& lead, const std::string& text, int width,
                                   size_t max_lines);

/// Redraws until SIGINT or SIGTERM; 0 then. An unreachable daemon is shown, not fatal.
int watch_status(const StatusQuery& query, std::chrono::milliseconds interval);

}  // namespace cohort
