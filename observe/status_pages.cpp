#include "observe/status_pages.hpp"

#include <algorithm>
#include <cstdio>

#include "observe/event_text.hpp"

namespace cohort::observe {
namespace {

constexpr int kLabelWidth = 200;
constexpr int kPlotWidth = 900;
constexpr int kRowHeight = 28;
constexpr int kTopMargin = 36;
constexpr size_t kEventRows = 200;

const char* kStyle = R"(<style>
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:left}
.round{fill:#5b8def}.round.odd{fill:#8fb0f5}.failure{fill:#d62728}.lost{fill:#222}
.hang{fill:#ff7f0e}.straggler{fill:#9467bd}.unhealthy{fill:#8c564b}.excluded{fill:#7f7f7f;
stroke:#222}.restart{stroke:#d62728;stroke-dasharray:4 3}.scaleup{stroke:#17becf;
stroke-dasharray:2 2}.end{stroke:#2ca02c;stroke-width:2}.label{font-size:12px}
.recovery{font-size:11px;fill:#d62728}.axis{font-size:11px;fill:#666}code{font-size:12px}
#legend span{margin-right:14px;white-space:nowrap}#legend svg{vertical-align:middle}
</style>)";

// What each colour means: a swatch per bar, dot and line kind, drawn with the page's classes.
std::string legend() {
  struct Entry {
    const char* shape;  // "bar", "dot" or "line"
    const char* kind;
    const char* meaning;
  };
  static const Entry kEntries[] = {
      {"bar", "round", "round (a node's workers running; alternate rounds lighter)"},
      {"dot", "failure", "worker failed"},
      {"dot", "lost", "node lost"},
      {"dot", "hang", "hang"},
      {"dot", "straggler", "straggler"},
      {"dot", "unhealthy", "unhealthy"},
      {"dot", "excluded", "host excluded"},
      {"line", "restart", "restart after a failure"},
      {"line", "scaleup", "scale-up (nodes joined; not a failure)"},
      {"line", "end", "run ended"}};
  std::string out = "<p id=\"legend\">\n";
  for (const Entry& entry : kEntries) {
    std::string shape = entry.shape;
    std::string kind = entry.kind;
    std::string swatch =
        shape == "bar"   ? "<rect width=\"18\" height=\"12\" class=\"" + kind + "\"/>"
        : shape == "dot" ? "<circle class=\"" + kind + "\" cx=\"9\" cy=\"6\" r=\"5\"/>"
                         : "<line class=\"" + kind + "\" x1=\"9\" x2=\"9\" y1=\"0\" y2=\"12\"/>";
    out +=
        "<span><svg width=\"18\" height=\"12\">" + swatch + "</svg> " + entry.meaning + "</span>\n";
  }
  return out + "</p>\n";
}

std::string format_ms(int64_t ms) {
  char buffer[32];
  if (ms < 10000) {
    std::snprintf(buffer, sizeof buffer, "%lld ms", static_cast<long long>(ms));
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1f s", static_cast<double>(ms) / 1000);
  }
  return buffer;
}

// Maps times to x positions in the plot.
class Scale {
 public:
  Scale(int64_t start, int64_t end) : start_(start), span_(std::max<int64_t>(end - start, 1)) {}
  int x(int64_t t) const {
    return kLabelWidth + static_cast<int>((t - start_) * kPlotWidth / span_);
  }
  int64_t span() const { return span_; }

 private:
  int64_t start_;
  int64_t span_;
};

// A node no event named (none is) goes below the last row.
int row_of(const Timeline& timeline, const std::string& node) {
  auto found = timeline.rows.find(node);
  return static_cast<int>(found == timeline.rows.end() ? timeline.nodes.size() : found->second);
}

int row_y(int row) { return kTopMargin + row * kRowHeight; }

std::string svg_rounds(const Timeline& timeline, const Scale& scale) {
  std::string out;
  for (const TimelineRound& round : timeline.rounds) {
    for (const TimelineMember& member : round.members) {
      int x = scale.x(round.start_ms);
      int width = std::max(scale.x(round.end_ms) - x, 2);
      out += "<rect class=\"round" + std::string(round.round % 2 ? " odd" : "") +
             "\" data-round=\"" + std::to_string(round.round) + "\" data-node=\"" +
             html_escape(member.node) + "\" x=\"" + std::to_string(x) + "\" y=\"" +
             std::to_string(row_y(row_of(timeline, member.node)) + 4) + "\" width=\"" +
             std::to_string(width) + "\" height=\"" + std::to_string(kRowHeight - 8) +
             "\"><title>round " + std::to_string(round.round) + ", group rank " +
             std::to_string(member.group_rank) + ", " + std::to_string(member.local_world_size) +
             " workers, " + format_ms(round.end_ms - round.start_ms) + "</title></rect>\n";
    }
  }
  return out;
}

const char* mark_class(TimelineMark::Kind kind) {
  switch (kind) {
    case TimelineMark::Kind::Failure:
      return "failure";
    case TimelineMark::Kind::Lost:
      return "lost";
    case TimelineMark::Kind::Hang:
      return "hang";
    case TimelineMark::Kind::Straggler:
      return "straggler";
    case TimelineMark::Kind::Unhealthy:
      return "unhealthy";
    case TimelineMark::Kind::Excluded:
      return "excluded";
    case TimelineMark::Kind::Restart:
      return "restart";
    case TimelineMark::Kind::ScaleUp:
      return "scaleup";
    case TimelineMark::Kind::End:
      return "end";
  }
  return "";
}

std::string svg_mark(const Timeline& timeline, const Scale& scale, const TimelineMark& mark) {
  std::string x = std::to_string(scale.x(mark.t_ms));
  std::string title = "<title>" + html_escape(mark.text) + "</title>";
  std::string kind = mark_class(mark.kind);
  if (mark.node.empty()) {  // the whole run: a line across every row
    std::string bottom = std::to_string(row_y(static_cast<int>(timeline.nodes.size())));
    return "<line class=\"mark " + kind + "\" x1=\"" + x + "\" x2=\"" + x + "\" y1=\"" +
           std::to_string(kTopMargin - 6) + "\" y2=\"" + bottom + "\">" + title + "</line>\n";
  }
  std::string cy = std::to_string(row_y(row_of(timeline, mark.node)) + kRowHeight / 2);
  return "<circle class=\"mark " + kind + "\" cx=\"" + x + "\" cy=\"" + cy + "\" r=\"6\">" + title +
         "</circle>\n";
}

std::string svg_recoveries(const Timeline& timeline, const Scale& scale) {
  std::string out;
  for (const Recovery& recovery : timeline.recoveries) {
    out += "<text class=\"recovery\" x=\"" + std::to_string(scale.x(recovery.from_ms) + 3) +
           "\" y=\"" + std::to_string(kTopMargin - 10) + "\">recovered in " +
           format_ms(recovery.to_ms - recovery.from_ms) + "</text>\n";
  }
  return out;
}

std::string svg_axis(const Timeline& timeline, const Scale& scale) {
  std::string out;
  int bottom = row_y(static_cast<int>(timeline.nodes.size())) + 14;
  for (int tick = 0; tick <= 4; ++tick) {
    int64_t t = timeline.start_ms + scale.span() * tick / 4;
    out += "<text class=\"axis\" x=\"" + std::to_string(scale.x(t)) + "\" y=\"" +
           std::to_string(bottom) + "\">+" + format_ms(t - timeline.start_ms) + "</text>\n";
  }
  for (size_t row = 0; row < timeline.nodes.size(); ++row) {
    const std::string& label = row < timeline.labels.size() ? timeline.labels[row] : "";
    out += "<text class=\"label\" x=\"4\" y=\"" +
           std::to_string(row_y(static_cast<int>(row)) + kRowHeight / 2 + 4) + "\">" +
           html_escape(label.empty() ? timeline.nodes[row] : label) + "<title>node " +
           html_escape(timeline.nodes[row]) + "</title></text>\n";
  }
  return out;
}

std::string timeline_svg(const Timeline& timeline) {
  Scale scale(timeline.start_ms, timeline.end_ms);
  int height = row_y(static_cast<int>(timeline.nodes.size())) + 24;
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"timeline\" width=\"" +
                    std::to_string(kLabelWidth + kPlotWidth + 60) + "\" height=\"" +
                    std::to_string(height) + "\">\n";
  out += svg_axis(timeline, scale) + svg_rounds(timeline, scale);
  for (const TimelineMark& mark : timeline.marks) out += svg_mark(timeline, scale, mark);
  out += svg_recoveries(timeline, scale);
  return out + "</svg>\n";
}

std::string events_table(const std::vector<nlohmann::json>& events) {
  std::string out = "<table id=\"events\"><tr><th>time</th><th>event</th><th>details</th></tr>\n";
  size_t first = events.size() > kEventRows ? events.size() - kEventRows : 0;
  for (size_t i = events.size(); i-- > first;) {
    const nlohmann::json& event = events[i];
    if (!event.is_object()) continue;
    out += "<tr><td>" + html_escape(event.value("time", "")) + "</td><td>" +
           html_escape(event.value("event", "")) + "</td><td><code>" +
           html_escape(event_details_text(event)) + "</code></td></tr>\n";
  }
  return out + "</table>\n";
}

// "1 round", "3 rounds".
std::string counted(size_t count, const char* one, const char* many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

// The run's root cause (why it failed or stopped; while it runs, once it completed or once its
// nodes all went, its last failure) in one line under the title.
std::string root_cause_line(const Timeline& timeline) {
  if (timeline.root_cause.empty()) return "<p id=\"root-cause\">no failures</p>\n";
  bool ended_badly = timeline.outcome == "failed" || timeline.outcome == "stopped";
  const char* said = ended_badly                       ? "root cause:"
                     : timeline.outcome == "abandoned" ? "last failure:"
                                                       : "last failure (recovered from):";
  return std::string("<p id=\"root-cause\"><b>") + said + "</b> " +
         html_escape(timeline.root_cause) + "</p>\n";
}

std::string page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html_escape(title) +
         "</title>" + kStyle + "</head><body>\n" + body + "</body></html>\n";
}

// Under a run's round: where the run came from, when this daemon took it over.
std::string resumed_note(const proto::StatusRun& run) {
  if (run.resumed_after < 0) return {};
  return "<br><small class=\"resumed\">" +
         html_escape(resumed_text(run.resumed_after, run.moved_from)) + "</small>";
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default: {  // a control character is no character of HTML's: shown as U+FFFD
        bool control =
            (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') ||
            c == '\x7f';
        if (control) {
          out += "\xef\xbf\xbd";
        } else {
          out += c;
        }
      }
    }
  }
  return out;
}

// Links to the runs that ended and whose history the daemon still holds.
std::string ended_list(const std::vector<std::string>& ended_runs) {
  if (ended_runs.empty()) return {};
  std::string out = "<h2>Ended runs</h2>\n<ul id=\"ended\">\n";
  for (const std::string& run : ended_runs) {
    out += "<li><a href=\"/runs/" + html_escape(run) + "\">" + html_escape(run) + "</a></li>\n";
  }
  return out + "</ul>\n";
}

std::string render_runs_page(const proto::StatusReply& status,
                             const std::vector<std::string>& ended_runs) {
  std::string body = "<h1>cohortd on port " + std::to_string(status.port) + "</h1>\n";
  for (const proto::MovedRun& gone : status.moved_runs) {
    body += "<p class=\"moved\">run " + html_escape(gone.run_id) + " moved to " +
            html_escape(gone.to) + " (its nodes left this daemon for it)</p>\n";
  }
  if (status.runs.empty()) {
    return page("cohortd", body + "<p>No runs.</p>\n" + ended_list(ended_runs));
  }
  body +=
      "<table id=\"runs\"><tr><th>run</th><th>phase</th><th>round</th><th>nodes</th>"
      "<th>restarts</th></tr>\n";
  for (const proto::StatusRun& run : status.runs) {
    body += "<tr><td><a href=\"/runs/" + html_escape(run.run_id) + "\">" + html_escape(run.run_id) +
            "</a></td><td>" + html_escape(run.phase) + "</td><td>" +
            (run.round >= 0 ? std::to_string(run.round) : "waiting for the first") +
            resumed_note(run) + "</td><td>" +
            std::to_string(run.nodes.size() + static_cast<size_t>(run.more_nodes)) + " (" +
            std::to_string(run.min_nodes) + ".." + std::to_string(run.max_nodes) + ")</td><td>" +
            std::to_string(run.restarts_used) + " of " + std::to_string(run.max_restarts) +
            "</td></tr>\n";
  }
  return page("cohortd", body + "</table>\n" + ended_list(ended_runs) +
                             "<p><a href=\"/metrics\">metrics</a></p>\n");
}

std::string render_run_page(const Timeline& timeline, const std::vector<nlohmann::json>& events) {
  std::string body =
      "<p><a href=\"/\">all runs</a></p>\n<h1>run " + html_escape(timeline.run_id) + ": " +
      html_escape(timeline.outcome) + "</h1>\n" + root_cause_line(timeline) +
      (timeline.resumed.empty() ? ""
                                : "<p id=\"resumed\">" + html_escape(timeline.resumed) + "</p>\n") +
      "<p>" + counted(timeline.rounds.size(), "round", "rounds") + ", " +
      counted(timeline.recoveries.size(), "recovery", "recoveries") + ", " +
      counted(timeline.scale_ups, "scale-up", "scale-ups") + ", " +
      format_ms(timeline.end_ms - timeline.start_ms) + "</p>\n";
  body += legend() + timeline_svg(timeline) + "<h2>Latest events</h2>\n" + events_table(events);
  return page("cohort run " + timeline.run_id, body);
}

}  // namespace cohort::observe
