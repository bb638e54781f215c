#include "launcher/cli/status_command.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/text.hpp"
#include "launcher/cli/control_request.hpp"
#include "observe/event_text.hpp"
#include "proto/auth.hpp"
#include "proto/control_messages.hpp"
#include "proto/untrusted_json.hpp"

namespace cohort {

namespace {

// A field a node or the daemon sent, shown on one line: its line breaks as spaces and every
// byte a terminal could act on made visible (a node's address may carry ESC or BEL).
std::string shown(const std::string& text) {
  std::string flat = text;
  for (char& c : flat) c = (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  return escape_for_terminal(flat);
}

std::string step_seconds(int64_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", static_cast<double>(ms) / 1000.0);
  return text;
}

// The slowest ranks of the round against the run's median step time (from step heartbeats):
// only those kSlowFactor x the median or slower, or "no stragglers".
void print_slowest(const proto::StatusRun& run, std::ostream& out) {
  if (run.slowest.empty() || run.median_step_ms <= 0) return;
  std::vector<proto::StatusRank> slow;
  for (const proto::StatusRank& rank : run.slowest) {
    if (static_cast<double>(rank.step_ms) >= kSlowFactor * static_cast<double>(run.median_step_ms))
      slow.push_back(rank);
  }
  if (slow.empty()) {
    out << "  no stragglers: no rank at " << kSlowFactor << " x the median step ("
        << step_seconds(run.median_step_ms) << ") or slower\n";
    return;
  }
  out << "  slowest ranks (" << kSlowFactor << " x the median step "
      << step_seconds(run.median_step_ms) << " or slower):\n";
  for (const proto::StatusRank& rank : slow) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2f",
                  static_cast<double>(rank.step_ms) / static_cast<double>(run.median_step_ms));
    out << "    rank " << rank.rank << " on " << shown(rank.node) << "  "
        << step_seconds(rank.step_ms) << " per step  " << ratio << " x the median\n";
  }
}

}  // namespace

void print_status_table(const proto::StatusReply& status, std::ostream& out) {
  if (status.runs.empty() && status.moved_runs.empty()) {
    out << "no runs\n";
    return;
  }
  for (const proto::MovedRun& moved : status.moved_runs) {
    out << "run " << shown(moved.run_id) << ": " << shown(observe::moved_text(moved.to)) << "\n";
  }
  for (const proto::StatusRun& run : status.runs) {
    out << "run " << shown(run.run_id) << ": " << shown(run.phase) << ", "
        << (run.round >= 0 ? "round " + std::to_string(run.round) : "waiting for the first round")
        << ", restarts " << run.restarts_used << "/" << run.max_restarts << ", nodes "
        << run.min_nodes << ":" << run.max_nodes << ", worker store port " << run.store_port
        << "\n";
    // Why it last restarted or stopped: after a hang, the collective and the rank that holds it.
    if (!run.last_failure.empty()) out << "  last failure: " << shown(run.last_failure) << "\n";
    if (run.resumed_after >= 0)
      out << "  " << shown(observe::resumed_text(run.resumed_after, run.moved_from)) << "\n";
    for (const proto::StatusNode& node : run.nodes) {
      out << "  " << shown(node.address) << "  " << shown(node.state);
      if (node.group_rank >= 0) out << "  rank " << node.group_rank;
      out << "  workers " << node.local_world_size << (node.succeeded ? "  done" : "") << "  ("
          << shown(node.node_id) << ")";
      if (!node.reason.empty()) out << "  " << shown(node.reason);
      out << "\n";
    }
    if (run.live_nodes >= 0) {  // a brief reply (--brief): counted, none listed
      out << "  " << run.more_nodes << (run.more_nodes == 1 ? " node, " : " nodes, ")
          << run.live_nodes << " heard within the heartbeat timeout\n";
    } else if (run.more_nodes > 0) {
      out << "  ... and " << run.more_nodes << " more nodes\n";
    }
    print_slowest(run, out);
  }
}

StatusFetch fetch_status(const StatusQuery& query) {
  AnswerCheck check(query.token, "status", query.run_id);
  ControlAnswer answer =
      control_request(query.endpoint, query.timeout_ms, [&](const std::string& challenge) {
        proto::StatusRequest request{query.run_id, "", check.nonce_for(challenge), query.brief};
        if (!query.token.empty())
          request.proof = proto::status_proof(query.token, challenge, query.run_id);
        return request;
      });
  std::string problem;
  std::optional<proto::StatusReply> reply =
      proven_answer_as<proto::StatusReply>(answer, check, problem);
  if (!reply) {
    int exit_code = answer.exit_code == kExitSuccess ? kExitRendezvous : answer.exit_code;
    bool answered = answer.message.has_value();
    if (exit_code == kExitUsage) return {std::nullopt, exit_code, problem, answered};
    return {std::nullopt, exit_code, "no status from " + query.endpoint + ": " + problem, answered};
  }
  reply->proof.clear();  // checked; not part of what is shown
  return {std::move(*reply), kExitSuccess, "", true};
}

namespace {

// "19:07:12.345  round.started  round 3, 8 ranks: 127.0.0.2 ranks 0-3, ...": an event as a line
// for people (observe/event_text.hpp); a line that is not JSON as it is.
std::string readable_event(const std::string& line) {
  nlohmann::json event = proto::parse_untrusted_json(line);
  if (!event.is_object()) return escape_for_terminal(line);
  return escape_for_terminal(observe::event_line(event));
}

// JSON for a terminal: every character past ASCII written as \uXXXX (JSON escapes the control
// characters below it already), so that no string a daemon sent can carry a terminal sequence
// (a C1 control, a bidirectional override). What does not parse is escaped as text.
std::string ascii_json(const std::string& text) {
  nlohmann::json parsed = proto::parse_untrusted_json(text);
  if (parsed.is_discarded()) return escape_for_terminal(text);
  return parsed.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

// The reply has run `run_id`, or says where it moved.
bool shows_run(const proto::StatusReply& status, const std::string& run_id) {
  auto named = [&](const auto& entry) { return entry.run_id == run_id; };
  return std::any_of(status.runs.begin(), status.runs.end(), named) ||
         std::any_of(status.moved_runs.begin(), status.moved_runs.end(), named);
}

// Run `run_id`'s events: the proven reply, or nullopt with `problem` and `exit_code` saying why.
std::optional<proto::EventsReply> fetch_events(const StatusQuery& query, const std::string& run_id,
                                               std::string& problem, int& exit_code) {
  AnswerCheck check(query.token, "events", run_id);
  ControlAnswer answer =
      control_request(query.endpoint, query.timeout_ms, [&](const std::string& challenge) {
        proto::EventsRequest request{run_id, "", check.nonce_for(challenge)};
        if (!query.token.empty())
          request.proof = proto::events_proof(query.token, challenge, run_id);
        return request;
      });
  exit_code = answer.exit_code == kExitUsage ? kExitUsage : kExitRendezvous;
  return proven_answer_as<proto::EventsReply>(answer, check, problem);
}

// " listed: it has ended (<how>)" when the daemon still holds the history of the run the status
// did not list (runs are listed while they form and run), else nothing.
std::string ended_run_text(const StatusQuery& query) {
  std::string problem;
  int exit_code = 0;
  std::optional<proto::EventsReply> reply = fetch_events(query, query.run_id, problem, exit_code);
  if (!reply || reply->events.empty()) return {};
  // How it ended (run.succeeded, run.failed, run.stopped...), which its nodes' leaving follows.
  auto ending = std::find_if(reply->events.rbegin(), reply->events.rend(), [](const auto& line) {
    nlohmann::json event = proto::parse_untrusted_json(line);
    if (!event.is_object() || !event.contains("event") || !event["event"].is_string()) return false;
    const std::string& name = event["event"].get_ref<const std::string&>();
    return name.rfind("run.", 0) == 0 && name != "run.created";
  });
  const std::string& shown = ending != reply->events.rend() ? *ending : reply->events.back();
  return cat(" listed: it has ended (", readable_event(shown), "; cohort status --events ",
             query.run_id, " shows its history)");
}

}  // namespace

int run_events_command(const StatusQuery& query) {
  std::string problem;
  int exit_code = 0;
  std::optional<proto::EventsReply> reply =
      fetch_events(query, query.events_run, problem, exit_code);
  if (!reply) {
    std::cerr << "cohort status: no events from " << query.endpoint << ": "
              << escape_for_terminal(problem) << "\n";
    return exit_code;
  }
  if (reply->dropped > 0) {
    std::cerr << "cohort status: the daemon no longer holds the run's " << reply->dropped
              << " oldest events (its --event-log file has them all)\n";
  }
  for (const std::string& line : reply->events) {
    std::cout << (query.json ? ascii_json(line) : readable_event(line)) << "\n";
  }
  return kExitSuccess;
}

int run_status_command(const StatusQuery& query) {
  StatusFetch fetched = fetch_status(query);
  if (!fetched.reply) {
    std::cerr << "cohort status: " << escape_for_terminal(fetched.problem) << "\n";
    return fetched.exit_code;
  }
  if (!query.run_id.empty() && !shows_run(*fetched.reply, query.run_id)) {
    std::cerr << "cohort status: " << query.endpoint << ": no run '" << query.run_id << "'"
              << ended_run_text(query) << "\n";
    return kExitRendezvous;
  }
  if (query.json) {
    std::cout << ascii_json(proto::encode_status_document(*fetched.reply)) << "\n";
  } else {
    print_status_table(*fetched.reply, std::cout);
  }
  return kExitSuccess;
}

}  // namespace cohort
