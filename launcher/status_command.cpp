#include "launcher/status_command.hpp"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/exit_codes.hpp"
#include "common/text.hpp"
#include "launcher/control_request.hpp"
#include "proto/auth.hpp"
#include "proto/control_messages.hpp"

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

// The slowest ranks of the round against the run's median step time (from step heartbeats).
void print_slowest(const proto::StatusRun& run, std::ostream& out) {
  if (run.slowest.empty() || run.median_step_ms <= 0) return;
  out << "  slowest ranks (median step " << step_seconds(run.median_step_ms) << "):\n";
  for (const proto::StatusRank& rank : run.slowest) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2f",
                  static_cast<double>(rank.step_ms) / static_cast<double>(run.median_step_ms));
    out << "    rank " << rank.rank << " on " << shown(rank.node) << "  "
        << step_seconds(rank.step_ms) << " per step  " << ratio << " x the median\n";
  }
}

}  // namespace

void print_status_table(const proto::StatusReply& status, std::ostream& out) {
  if (status.runs.empty()) {
    out << "no runs\n";
    return;
  }
  for (const proto::StatusRun& run : status.runs) {
    out << "run " << shown(run.run_id) << ": " << shown(run.phase) << ", round " << run.round
        << ", restarts " << run.restarts_used << "/" << run.max_restarts << ", nodes "
        << run.min_nodes << ":" << run.max_nodes << ", worker store port " << run.store_port
        << "\n";
    for (const proto::StatusNode& node : run.nodes) {
      out << "  " << shown(node.address) << "  " << shown(node.state);
      if (node.group_rank >= 0) out << "  rank " << node.group_rank;
      out << "  workers " << node.local_world_size << (node.succeeded ? "  done" : "") << "  ("
          << shown(node.node_id) << ")";
      if (!node.reason.empty()) out << "  " << shown(node.reason);
      out << "\n";
    }
    if (run.more_nodes > 0) out << "  ... and " << run.more_nodes << " more nodes\n";
    print_slowest(run, out);
  }
}

StatusFetch fetch_status(const StatusQuery& query) {
  ControlAnswer answer =
      control_request(query.endpoint, query.timeout_ms, [&](const std::string& challenge) {
        proto::StatusRequest request{query.run_id, ""};
        if (!query.token.empty())
          request.proof = proto::status_proof(query.token, challenge, query.run_id);
        return request;
      });
  std::string problem;
  std::optional<proto::StatusReply> reply = answer_as<proto::StatusReply>(answer, problem);
  if (!reply) {
    int exit_code = answer.exit_code == kExitSuccess ? kExitRendezvous : answer.exit_code;
    if (exit_code == kExitUsage) return {std::nullopt, exit_code, problem};
    return {std::nullopt, exit_code, "no status from " + query.endpoint + ": " + problem};
  }
  return {std::move(*reply), kExitSuccess, ""};
}

namespace {

// "19:07:12.345  round.started  round=3 world_size=8 ...": an event as a line for people.
std::string readable_event(const std::string& line) {
  nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
  if (!event.is_object()) return line;
  std::string time = event.value("time", std::string());
  size_t clock = time.find('T');
  std::string text = (clock == std::string::npos ? time : time.substr(clock + 1)) + "  " +
                     event.value("event", std::string("?"));
  for (const auto& [key, value] : event.items()) {
    if (key == "time" || key == "t_ms" || key == "source" || key == "seq" || key == "run" ||
        key == "event") {
      continue;
    }
    text +=
        "  " + key + "=" +
        (value.is_string() ? value.get<std::string>()
                           : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return escape_for_terminal(text);
}

}  // namespace

int run_events_command(const StatusQuery& query) {
  ControlAnswer answer =
      control_request(query.endpoint, query.timeout_ms, [&](const std::string& challenge) {
        proto::EventsRequest request{query.events_run, ""};
        if (!query.token.empty())
          request.proof = proto::events_proof(query.token, challenge, query.events_run);
        return request;
      });
  std::string problem;
  std::optional<proto::EventsReply> reply = answer_as<proto::EventsReply>(answer, problem);
  if (!reply) {
    std::cerr << "cohort status: no events from " << query.endpoint << ": " << problem << "\n";
    return answer.exit_code == kExitUsage ? kExitUsage : kExitRendezvous;
  }
  if (reply->dropped > 0) {
    std::cerr << "cohort status: the daemon no longer holds the run's " << reply->dropped
              << " oldest events (its --event-log file has them all)\n";
  }
  for (const std::string& line : reply->events) {
    std::cout << (query.json ? line : readable_event(line)) << "\n";
  }
  return kExitSuccess;
}

int run_status_command(const StatusQuery& query) {
  StatusFetch fetched = fetch_status(query);
  if (!fetched.reply) {
    std::cerr << "cohort status: " << fetched.problem << "\n";
    return fetched.exit_code;
  }
  if (query.json) {
    std::cout << proto::encode_status_document(*fetched.reply) << "\n";
  } else {
    print_status_table(*fetched.reply, std::cout);
  }
  return kExitSuccess;
}

}  // namespace cohort
