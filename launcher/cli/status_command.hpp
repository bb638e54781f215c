// `cohort status --rdzv-endpoint H:P [--rdzv-id ID] [--json]`: asks a rendezvous daemon what it
// knows (runs, rounds, members, restarts), proving it holds the token when one is configured,
// and prints it; with --events RUN, the run's events instead. Blocking; main thread.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "proto/control_messages.hpp"

namespace cohort {

/// `cohort status` lists a rank among the slowest when its step time is this many times the
/// run's median or more (below, every rank is within the run's normal spread).
constexpr double kSlowFactor = 1.2;

/// The table `cohort status` prints: one line per run, one indented line per node, then the
/// ranks kSlowFactor x the median step time or slower ("no stragglers" when none is).
void print_status_table(const proto::StatusReply& status, std::ostream& out);

struct StatusQuery {
  std::string endpoint = "127.0.0.1:29400";
  std::string run_id;  ///< only this run (a run's token shows only its run); empty: every run
  std::string token;   ///< the daemon's or the run's token; empty: none
  bool json = false;
  int timeout_ms = 5000;
  std::string events_run;  ///< --events RUN: that run's events instead of the status
  std::string fallbacks;   ///< --rdzv-fallback: where the run may have moved
  bool brief = false;      ///< --brief: each run's nodes counted (and the live ones), none listed
};

/// One status request: the reply, or why there is none with the exit code that says so.
struct StatusFetch {
  std::optional<proto::StatusReply> reply;
  int exit_code = 0;
  std::string problem;
  bool answered = false;  ///< something answered at the endpoint (a reply, or an error)
};
StatusFetch fetch_status(const StatusQuery& query);

int run_status_command(const StatusQuery& query);
/// `cohort status --events RUN`: the run's events, a line each (raw JSON lines with --json).
int run_events_command(const StatusQuery& query);

}  // namespace cohort
