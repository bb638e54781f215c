// Events (docs/EVENTS.md) as lines people read, for `cohort status --events` and the timeline
// page's event table: a failure summary by its meaningful line (not its banner), a round's
// members as addresses with their global rank ranges (not JSON), each known event in words and
// an unknown one as key=value pairs. Pure; any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace cohort::observe {

/// The first line of `text` that says something: not empty and not a banner of '=', '-', '*'
/// or spaces; "" when there is none.
std::string meaningful_line(const std::string& text);

/// "127.0.0.2 ranks 0-3, node-b (127.0.0.3) ranks 4-7": a round's `members` array
/// (docs/EVENTS.md, round.started) in group-rank order, each by its host and address (or node
/// id) and the global ranks its workers hold.
std::string members_text(const nlohmann::json& members);

/// True for a restart's reason that tells of nodes joining (a scale-up), not of a failure.
bool is_scale_up(const std::string& reason);

/// Where a run that a daemon took over came from: "resumed here after round 3, which ran at
/// gpu-1:29400 (--rdzv-fallback)", or "resumed here after round 3 (the daemon restarted)" when
/// its nodes named no other endpoint; "" when resumed_after < 0 (the run began here). For
/// round.started's resumed_after and moved_from, and cohort status's line of the same fields.
std::string resumed_text(int resumed_after, const std::string& moved_from);
/// The same words from a round.started event's resumed_after and moved_from; "" without them.
std::string resumed_text(const nlohmann::json& round_started);
/// "moved to H (its nodes left this daemon for it: ask there, or give --rdzv-fallback)": what a
/// daemon that a run's nodes all left for endpoint `to` says of the run (cohort status, and its
/// refusal of a request about the run).
std::string moved_text(const std::string& to);

/// What the event says, without its time and name: "round 3, 8 ranks: 127.0.0.2 ranks 0-3, ...".
std::string event_details_text(const nlohmann::json& event);

/// "19:07:12.345  round.started  round 3, 8 ranks: ...": one event on one line (no line breaks;
/// bytes a terminal could act on are left to the caller).
std::string event_line(const nlohmann::json& event);

}  // namespace cohort::observe
