#include "launcher/cli/status_watch.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string_view>

#include "common/exit_codes.hpp"
#include "common/text.hpp"
#include "common/utf8.hpp"
#include "observe/event_text.hpp"

namespace cohort {
namespace {

// "0.3 s", "12 s", "4m05s": a heartbeat age or an interval at a glance.
std::string age_text(int64_t ms) {
  char buffer[32];
  if (ms < 10000) {
    std::snprintf(buffer, sizeof buffer, "%.1f s", static_cast<double>(ms) / 1000);
  } else if (ms < 600000) {
    std::snprintf(buffer, sizeof buffer, "%lld s", static_cast<long long>(ms / 1000));
  } else {
    std::snprintf(buffer, sizeof buffer, "%lldm%02llds", static_cast<long long>(ms / 60000),
                  static_cast<long long>(ms / 1000 % 60));
  }
  return buffer;
}

// A terminal gives a character one column whatever its bytes (wide CJK and emoji, two, are rare
// in what the screen shows), so columns are counted as UTF-8 characters: the bytes that do not
// continue one. What the screen prints has been through escape_for_terminal: valid UTF-8.
size_t columns(std::string_view text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return !continues_utf8_character(c); }));
}

// The byte where the column `column` of `text` starts (its size if the text is narrower): a cut
// there keeps whole characters, where a cut at a byte count could split one.
size_t column_start(std::string_view text, size_t column) {
  size_t at = 0;
  for (size_t seen = 0; at < text.size(); ++at) {
    if (continues_utf8_character(text[at])) continue;
    if (seen++ == column) return at;
  }
  return at;
}

std::string padded(const std::string& text, size_t width) {
  size_t used = columns(text);
  return used >= width ? text + " " : text + std::string(width - used, ' ');
}

// One line of the screen: line breaks as spaces, every byte a terminal could act on made
// visible (a node's address or a failure may carry ESC or BEL), then cut to the width.
std::string cut(const std::string& line, int width) {
  std::string flat = line;
  for (char& c : flat) c = (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  flat = escape_for_terminal(flat);
  return width > 0 ? flat.substr(0, column_start(flat, static_cast<size_t>(width))) : flat;
}

// At most this many lines for a run's last failure; the last of them ends in "..." if cut.
constexpr size_t kFailureLines = 3;
constexpr const char* kFailureLead = "  last failure: ";

void run_lines(const proto::StatusRun& run, int width, std::string& out) {
  std::string nodes = cat(run.nodes.size() + static_cast<size_t>(run.more_nodes), " (",
                          run.min_nodes, ":", run.max_nodes, ")");
  out += cut(padded(run.run_id, 20) + padded(run.phase, 10) +
                 padded(run.round >= 0 ? cat(run.round) : "-", 7) + padded(nodes, 11) +
                 cat(run.restarts_used, "/", run.max_restarts),
             width) +
         "\n";
  if (!run.last_failure.empty()) {
    for (const std::string& line : wrap_text(kFailureLead, run.last_failure, width, kFailureLines))
      out += cut(line, width) + "\n";
  }
  if (run.resumed_after >= 0)
    out += cut("  " + observe::resumed_text(run.resumed_after, run.moved_from), width) + "\n";
  for (const proto::StatusNode& node : run.nodes) {
    std::string rank = node.group_rank >= 0 ? cat(node.group_rank) : "-";
    out += cut("  " + padded(node.address, 18) + padded(node.state, 11) + padded(rank, 6) +
                   padded(cat(node.local_world_size), 9) +
                   padded(age_text(node.heartbeat_age_ms), 10) + (node.succeeded ? "done" : ""),
               width) +
           "\n";
  }
  if (run.live_nodes >= 0) {  // a brief reply (--brief): counted, none listed
    out += cut(cat("  ", run.live_nodes, " of ", run.more_nodes,
                   " nodes heard within the heartbeat timeout"),
               width) +
           "\n";
  } else if (run.more_nodes > 0) {
    out += cut(cat("  ... and ", run.more_nodes, " more nodes"), width) + "\n";
  }
}

}  // namespace

std::vector<std::string> wrap_text(const std::string& lead, const std::string& text, int width,
                                   size_t max_lines) {
  std::string flat = text;
  for (char& c : flat) c = (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  flat = escape_for_terminal(flat);
  size_t room = static_cast<size_t>(width);
  if (width <= 0 || columns(lead) + columns(flat) <= room) return {lead + flat};
  std::string indent(columns(lead) <= room / 2 ? columns(lead) : 2, ' ');
  std::vector<std::string> lines;
  std::string line = lead;
  for (size_t at = 0; at < flat.size();) {
    size_t used = columns(line);
    size_t left = room > used ? room - used : 1;
    size_t fits = at + column_start(std::string_view(flat).substr(at), left);  // its end
    if (fits == flat.size()) {
      line += flat.substr(at);
      break;
    }
    // Break at the last space that fits; a word longer than the line is cut.
    size_t space = flat.rfind(' ', fits);
    size_t end = space != std::string::npos && space > at ? space : fits;
    line += flat.substr(at, end - at);
    for (at = end; at < flat.size() && flat[at] == ' ';) ++at;
    if (at < flat.size() && lines.size() + 1 >= max_lines) {
      if (columns(line) + 3 > room) line.resize(column_start(line, room > 3 ? room - 3 : 0));
      while (line.size() > indent.size() && line.back() == ' ') line.pop_back();
      lines.push_back(line + "...");
      return lines;
    }
    lines.push_back(line);
    line = indent;
  }
  if (line != indent) lines.push_back(line);
  return lines;
}

namespace {

std::string wall_clock() {
  std::time_t now = std::time(nullptr);
  char buffer[16];
  std::tm local{};
  ::localtime_r(&now, &local);
  std::strftime(buffer, sizeof buffer, "%H:%M:%S", &local);
  return buffer;
}

int terminal_width() {
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 0;  // not a terminal: no cut
}

// A stop signal during a fetch: nothing is half drawn then, and nothing else needs undoing.
void leave_now(int) {
  const char newline = '\n';
  [[maybe_unused]] ssize_t written = ::write(STDOUT_FILENO, &newline, 1);
  ::_exit(kExitSuccess);
}

}  // namespace

std::string watch_screen(const StatusFetch& fetched, const StatusQuery& query,
                         std::chrono::milliseconds interval, const std::string& clock, int width,
                         const std::string& moved) {
  std::string out = cut(cat("cohort status --watch  ", query.endpoint, "  every ",
                            age_text(interval.count()), "  ", clock, "  (Ctrl-C to stop)"),
                        width) +
                    "\n";
  if (!moved.empty())
    out += cut("followed the run here from " + moved + " (--rdzv-fallback)", width) + "\n";
  out += "\n";
  if (!fetched.reply) return out + cut(fetched.problem, width) + "\n";
  for (const proto::MovedRun& gone : fetched.reply->moved_runs)
    out += cut(cat("run ", gone.run_id, " moved to ", gone.to), width) + "\n";
  if (fetched.reply->runs.empty() && fetched.reply->moved_runs.empty()) {
    // A mistyped --rdzv-id must not read as an idle daemon.
    if (query.run_id.empty()) return out + "no runs\n";
    return out + cut(cat("no run '", query.run_id, "' at ", query.endpoint, " (yet)"), width) +
           "\n";
  }
  if (fetched.reply->runs.empty()) return out;
  out += cut("RUN                 PHASE     ROUND  NODES      RESTARTS", width) + "\n";
  if (!query.brief)
    out += cut("  NODE              STATE      RANK  WORKERS  HEARTBEAT", width) + "\n";
  for (const proto::StatusRun& run : fetched.reply->runs) run_lines(run, width, out);
  return out;
}

bool shows_run(const StatusFetch& fetched, const std::string& run_id) {
  if (!fetched.reply) return false;
  if (run_id.empty()) return true;
  for (const proto::StatusRun& run : fetched.reply->runs) {
    if (run.run_id == run_id && (run.phase == "forming" || run.phase == "running")) return true;
  }
  return false;
}

void ElsewhereLooks::found_nothing(Clock::time_point now) {
  constexpr std::chrono::milliseconds kLongestGap{30000};
  gap_ = gap_.count() == 0 ? interval_ : std::min(gap_ * 2, std::max(kLongestGap, interval_));
  next_ = now + gap_;
}

void ElsewhereLooks::shown() {
  gap_ = std::chrono::milliseconds(0);
  next_.reset();
}

int watch_status(StatusQuery query, std::chrono::milliseconds interval,
                 const RelocateWatch& relocate) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);  // its terminal closed
  // Blocked while a screen is drawn and taken by sigtimedwait between screens; during a fetch,
  // which may wait its whole timeout on a silent daemon, a stop signal ends the watch at once.
  ::sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  struct sigaction leave {};
  leave.sa_handler = leave_now;
  sigfillset(&leave.sa_mask);
  ::sigaction(SIGINT, &leave, nullptr);
  ::sigaction(SIGTERM, &leave, nullptr);
  ::sigaction(SIGHUP, &leave, nullptr);
  // On a terminal each screen replaces the last; into a file or a pipe they follow each other,
  // a blank line apart, with no control sequence in between.
  const bool redraw = ::isatty(STDOUT_FILENO) == 1;
  bool first = true;
  std::string moved;  // where the watch followed the run from, if it did
  ElsewhereLooks looks(interval);
  for (;;) {
    ::sigprocmask(SIG_UNBLOCK, &stop_signals, nullptr);
    StatusFetch fetched = fetch_status(query);
    if (!relocate || shows_run(fetched, query.run_id)) {
      looks.shown();
    } else if (looks.due(ElsewhereLooks::Clock::now())) {
      std::string elsewhere = relocate(query.endpoint);
      if (elsewhere.empty()) {
        looks.found_nothing(ElsewhereLooks::Clock::now());
      } else {
        looks.shown();
        moved = query.endpoint;
        query.endpoint = elsewhere;
        fetched = fetch_status(query);
      }
    }
    ::sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
    std::string screen =
        watch_screen(fetched, query, interval, wall_clock(), terminal_width(), moved);
    std::cout << (redraw ? "\x1b[H\x1b[2J" : first ? "" : "\n") << screen << std::flush;
    first = false;
    timespec wait{static_cast<time_t>(interval.count() / 1000),
                  static_cast<long>(interval.count() % 1000) * 1000000};
    if (::sigtimedwait(&stop_signals, nullptr, &wait) > 0) break;
  }
  std::cout << "\n";
  return kExitSuccess;
}

}  // namespace cohort
