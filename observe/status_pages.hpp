// The daemon's HTML pages, generated whole on the server: `/` lists the runs, `/runs/<id>`
// draws one run's timeline as inline SVG (a row per node, a bar per round it took part in,
// marks for failures, losses, hangs and restarts, recovery times labelled) above its latest
// events. Self-contained: no scripts, no external files, so it works offline on a cluster and
// refreshes by reload. Pure; any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "observe/timeline.hpp"
#include "proto/control_messages.hpp"

namespace cohort::observe {

std::string render_runs_page(const proto::StatusReply& status,
                             const std::vector<std::string>& ended_runs = {});
/// `events` are the run's events (the table shows the latest 200), `timeline` built from them.
std::string render_run_page(const Timeline& timeline, const std::vector<nlohmann::json>& events);

/// Text made safe inside HTML elements and attribute values.
std::string html_escape(const std::string& text);

}  // namespace cohort::observe
