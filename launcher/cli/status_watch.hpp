// `cohort status --watch`: asks the daemon again every interval and redraws one compact screen
// (runs with phase, round, nodes and restarts, the last failure on lines of its own, wrapped to
// the terminal; each node with its state, rank, workers and heartbeat age) until Ctrl-C, like
// `watch` or `top`. The screen is a pure function of the reply; the loop blocks the main thread
// between requests.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/status_command.hpp"

namespace cohort {

/// The screen for one reply (or for `problem` when there was none), `width` columns wide at
/// most, headed by the endpoint, the interval and the wall-clock time `clock`, then `moved`
/// (where the watch followed the run from) when not empty.
std::string watch_screen(const StatusFetch& fetched, const StatusQuery& query,
                         std::chrono::milliseconds interval, const std::string& clock, int width,
                         const std::string& moved = "");

/// Whether `fetched` shows what the watch is for: run `run_id` forming or running (with no run
/// id: any answer of a daemon). When it does not, the watch looks for the run elsewhere.
bool shows_run(const StatusFetch& fetched, const std::string& run_id);

/// Where the watch's run is when `current` does not show it (empty: nowhere else).
using RelocateWatch = std::function<std::string(const std::string& current)>;

/// When a watch whose endpoint no longer shows its run asks the other endpoints: at once, then
/// after 1, 2, 4... intervals without finding it (at most 30 s apart), and at once again after
/// the endpoint showed the run. So a run that ended, or endpoints that drop connections (2 s
/// each), do not slow every redraw. Owned by the watch loop; pure, time passed in.
class ElsewhereLooks {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ElsewhereLooks(std::chrono::milliseconds interval) : interval_(interval) {}

  bool due(Clock::time_point now) const { return !next_ || now >= *next_; }
  /// A look found the run nowhere else: the next waits twice as long as the last.
  void found_nothing(Clock::time_point now);
  /// The endpoint shows the run (or the watch followed it): a later absence is asked at once.
  void shown();

 private:
  std::chrono::milliseconds interval_;
  std::chrono::milliseconds gap_{0};
  std::optional<Clock::time_point> next_;
};

/// `lead` then `text` in lines of at most `width` columns (0: one line), broken at spaces, the
/// lines after the first indented as wide as `lead`; at most `max_lines`, the last ending in
/// "..." when the text was cut. Line breaks and bytes a terminal could act on are made harmless.
std::vector<std::string> wrap_text(const std::string& lead, const std::string& text, int width,
                                   size_t max_lines);

/// Redraws until SIGINT or SIGTERM; 0 then. An unreachable daemon is shown, not fatal. With
/// `relocate` (--rdzv-fallback), a run that moved is followed to its new endpoint.
int watch_status(StatusQuery query, std::chrono::milliseconds interval,
                 const RelocateWatch& relocate = nullptr);

}  // namespace cohort
