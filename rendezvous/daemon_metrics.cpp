#include "rendezvous/daemon_metrics.hpp"

namespace cohort {
namespace {

std::vector<double> seconds_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
}

std::string text_of(const nlohmann::json& event, const char* key) {
  auto found = event.find(key);
  return found != event.end() && found->is_string() ? found->get<std::string>() : "";
}

void counter(observe::PrometheusText& text, const std::string& name, const std::string& help,
             uint64_t value) {
  text.family(name, "counter", help);
  text.sample(name, static_cast<double>(value));
}

}  // namespace

DaemonMetrics::DaemonMetrics()
    : detect_seconds_(seconds_buckets()), recover_seconds_(seconds_buckets()) {}

std::string DaemonMetrics::loss_class(const std::string& reason) {
  if (reason.rfind("heartbeat", 0) == 0 || reason.find("no heartbeat") != std::string::npos)
    return "heartbeat_timeout";
  if (reason.rfind("connection closed", 0) == 0) return "connection_closed";
  if (reason.find("stdin") != std::string::npos) return "launcher_gone";
  return "other";
}

void DaemonMetrics::on_event(const nlohmann::json& event) {
  ++events_;
  std::string name = text_of(event, "event");
  std::string run = text_of(event, "run");
  int64_t t = event.value("t_ms", int64_t{0});
  if (name == "run.created") {
    ++runs_created_;
  } else if (name == "round.started") {
    ++rounds_started_;
    auto since = recovering_since_ms_.find(run);
    if (since != recovering_since_ms_.end()) {
      recover_seconds_.observe(static_cast<double>(t - since->second) / 1000);
      recovering_since_ms_.erase(since);
    }
  } else if (name == "restart.decided") {
    ++restarts_;
    // A loss just before keeps its earlier start; a scale-up recovers from nothing.
    auto scale_up = event.find("scale_up");
    if (scale_up == event.end() || *scale_up != true) recovering_since_ms_.emplace(run, t);
  } else if (name == "worker.failed") {
    ++worker_failures_;
  } else if (name == "node.lost") {
    ++nodes_lost_[loss_class(text_of(event, "reason"))];
    if (event.contains("silent_ms") && event["silent_ms"].is_number())
      detect_seconds_.observe(event["silent_ms"].get<double>() / 1000);
    // Only a member's loss restarts the round; a pending node's or a spare's restarts nothing.
    auto member = event.find("member");
    if (member != event.end() && *member == true) recovering_since_ms_.emplace(run, t);
  } else if (name == "run.completed" || name == "run.failed" || name == "run.stopped" ||
             name == "run.abandoned") {
    ++runs_ended_[name.substr(4)];
    recovering_since_ms_.erase(run);
  }
}

std::string DaemonMetrics::render(const MetricsSnapshot& now) const {
  observe::PrometheusText text;
  std::map<std::string, int> by_phase{{"forming", 0}, {"running", 0}};
  for (const auto& run : now.runs) ++by_phase[run.phase];
  text.family("cohort_runs", "gauge", "Runs the daemon holds, by phase.");
  for (const auto& [phase, count] : by_phase) text.sample("cohort_runs", {{"phase", phase}}, count);

  text.family("cohort_run_round", "gauge", "The run's current round (-1 before the first).");
  for (const auto& run : now.runs) text.sample("cohort_run_round", {{"run", run.id}}, run.round);
  text.family("cohort_run_restarts_used", "gauge", "Restarts the run has used.");
  for (const auto& run : now.runs)
    text.sample("cohort_run_restarts_used", {{"run", run.id}}, run.restarts_used);
  text.family("cohort_run_restarts_left", "gauge", "Restarts the run has left.");
  for (const auto& run : now.runs)
    text.sample("cohort_run_restarts_left", {{"run", run.id}},
                run.max_restarts - run.restarts_used);

  text.family("cohort_run_resumed_after_round", "gauge",
              "A run this daemon took over (restarted, or moved here with --rdzv-fallback): the "
              "round its nodes carried, and where it ran (from, empty: this endpoint).");
  for (const auto& run : now.runs) {
    if (run.resumed_after < 0) continue;
    text.sample("cohort_run_resumed_after_round", {{"run", run.id}, {"from", run.moved_from}},
                run.resumed_after);
  }

  text.family("cohort_run_moved", "gauge",
              "A run whose nodes all left this daemon for another endpoint (to): 1 while it is "
              "not back (--rdzv-fallback).");
  for (const auto& [run, to] : now.moved_runs)
    text.sample("cohort_run_moved", {{"run", run}, {"to", to}}, 1);

  std::map<std::pair<std::string, std::string>, int> by_state;
  for (const auto& node : now.nodes) ++by_state[{node.run, node.state}];
  text.family("cohort_nodes", "gauge", "Nodes of each run, by state.");
  for (const auto& [key, count] : by_state)
    text.sample("cohort_nodes", {{"run", key.first}, {"state", key.second}}, count);
  text.family("cohort_node_heartbeat_age_seconds", "gauge", "Time since the node's last frame.");
  for (const auto& node : now.nodes) {
    text.sample("cohort_node_heartbeat_age_seconds", {{"run", node.run}, {"node", node.node}},
                node.heartbeat_age_seconds);
  }

  text.family("cohort_store_connections", "gauge", "Worker store connections of the run's round.");
  for (const auto& run : now.runs)
    text.sample("cohort_store_connections", {{"run", run.id}},
                static_cast<double>(run.store_connections));
  text.family("cohort_store_operations", "gauge",
              "Requests the run's current worker store has served (it is new each round).");
  for (const auto& run : now.runs)
    text.sample("cohort_store_operations", {{"run", run.id}},
                static_cast<double>(run.store_operations));
  text.family("cohort_store_budget_bytes", "gauge",
              "What all the worker stores may hold together (--store-budget).");
  text.sample("cohort_store_budget_bytes", static_cast<double>(now.store_budget_bytes));
  text.family("cohort_store_budget_used_bytes", "gauge",
              "What all the worker stores hold now, as their quotas count it.");
  text.sample("cohort_store_budget_used_bytes", static_cast<double>(now.store_budget_used_bytes));
  text.family("cohort_control_connections", "gauge", "Open control connections (agents, queries).");
  text.sample("cohort_control_connections", static_cast<double>(now.control_connections));
  counter(text, "cohort_control_connections_accepted_total",
          "Control connections accepted (agents, queries, strangers; refused ones too).",
          now.control_connections_accepted);

  counter(text, "cohort_events_total", "Events the daemon recorded.", events_);
  counter(text, "cohort_runs_created_total", "Runs created.", runs_created_);
  text.family("cohort_runs_ended_total", "counter", "Runs ended, by outcome.");
  for (const char* outcome : {"completed", "failed", "stopped", "abandoned"}) {
    auto found = runs_ended_.find(outcome);
    text.sample("cohort_runs_ended_total", {{"outcome", outcome}},
                static_cast<double>(found == runs_ended_.end() ? 0 : found->second));
  }
  counter(text, "cohort_rounds_started_total", "Rounds started, every run.", rounds_started_);
  counter(text, "cohort_restarts_total", "Restarts decided, every run.", restarts_);
  counter(text, "cohort_worker_failures_total", "Worker failures reported.", worker_failures_);
  text.family("cohort_nodes_lost_total", "counter", "Nodes lost, by reason.");
  for (const char* reason : {"connection_closed", "heartbeat_timeout", "launcher_gone", "other"}) {
    auto found = nodes_lost_.find(reason);
    text.sample("cohort_nodes_lost_total", {{"reason", reason}},
                static_cast<double>(found == nodes_lost_.end() ? 0 : found->second));
  }
  text.family("cohort_loss_detect_seconds", "histogram",
              "From a lost node's last frame to its loss being declared.");
  text.histogram("cohort_loss_detect_seconds", {}, detect_seconds_);
  text.family("cohort_recover_seconds", "histogram",
              "From a restart decided (or a member of the round lost) to the next round started.");
  text.histogram("cohort_recover_seconds", {}, recover_seconds_);
  return text.text();
}

}  // namespace cohort
