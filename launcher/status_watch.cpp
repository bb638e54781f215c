#include "launcher/status_watch.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "common/exit_codes.hpp"
#include "common/text.hpp"

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

std::string padded(const std::string& text, size_t width) {
  return text.size() >= width ? text + " " : text + std::string(width - text.size(), ' ');
}

// One line of the screen: line breaks as spaces, every byte a terminal could act on made
// visible (a node's address or a failure may carry ESC or BEL), then cut to the width.
std::string cut(const std::string& line, int width) {
  std::string flat = line;
  for (char& c : flat) c = (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  flat = escape_for_terminal(flat);
  return width > 0 && flat.size() > static_cast<size_t>(width) ? flat.substr(0, width) : flat;
}

void run_lines(const proto::StatusRun& run, int width, std::string& out) {
  std::string nodes = cat(run.nodes.size() + static_cast<size_t>(run.more_nodes), " (",
                          run.min_nodes, ":", run.max_nodes, ")");
  out += cut(padded(run.run_id, 20) + padded(run.phase, 10) + padded(cat(run.round), 7) +
                 padded(nodes, 11) + padded(cat(run.restarts_used, "/", run.max_restarts), 10) +
                 (run.last_failure.empty() ? "-" : run.last_failure),
             width) +
         "\n";
  for (const proto::StatusNode& node : run.nodes) {
    std::string rank = node.group_rank >= 0 ? cat(node.group_rank) : "-";
    out += cut("  " + padded(node.address, 18) + padded(node.state, 11) + padded(rank, 6) +
                   padded(cat(node.local_world_size), 9) +
                   padded(age_text(node.heartbeat_age_ms), 10) + (node.succeeded ? "done" : ""),
               width) +
           "\n";
  }
  if (run.more_nodes > 0)
    out += cut(cat("  ... and ", run.more_nodes, " more nodes"), width) + "\n";
}

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

}  // namespace

std::string watch_screen(const StatusFetch& fetched, const StatusQuery& query,
                         std::chrono::milliseconds interval, const std::string& clock, int width) {
  std::string out = cut(cat("cohort status --watch  ", query.endpoint, "  every ",
                            age_text(interval.count()), "  ", clock, "  (Ctrl-C to stop)"),
                        width) +
                    "\n\n";
  if (!fetched.reply) return out + cut(fetched.problem, width) + "\n";
  if (fetched.reply->runs.empty()) return out + "no runs\n";
  out +=
      cut("RUN                 PHASE     ROUND  NODES      RESTARTS  LAST FAILURE", width) + "\n";
  out += cut("  NODE              STATE      RANK  WORKERS  HEARTBEAT", width) + "\n";
  for (const proto::StatusRun& run : fetched.reply->runs) run_lines(run, width, out);
  return out;
}

int watch_status(const StatusQuery& query, std::chrono::milliseconds interval) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &stop_signals, nullptr);  // taken by sigtimedwait below, not fatal
  for (;;) {
    StatusFetch fetched = fetch_status(query);
    std::string screen = watch_screen(fetched, query, interval, wall_clock(), terminal_width());
    std::cout << "\x1b[H\x1b[2J" << screen << std::flush;  // home, clear, draw
    timespec wait{static_cast<time_t>(interval.count() / 1000),
                  static_cast<long>(interval.count() % 1000) * 1000000};
    if (::sigtimedwait(&stop_signals, nullptr, &wait) > 0) break;
  }
  std::cout << "\n";
  return kExitSuccess;
}

}  // namespace cohort
