#include "rendezvous/daemon_metrics.hpp"

#include <catch2/catch.hpp>

using namespace cohort;
using nlohmann::json;

namespace {

json event(int64_t t, const std::string& name, json fields = json::object()) {
  fields["t_ms"] = t;
  fields["event"] = name;
  fields["run"] = "job";
  return fields;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

}  // namespace

TEST_CASE("daemon metrics count the events and time recoveries", "[unit][rendezvous][metrics]") {
  DaemonMetrics metrics;
  for (const json& e :
       {event(0, "run.created"), event(10, "round.started"), event(500, "worker.failed"),
        event(501, "restart.decided"), event(801, "round.started"),
        event(900, "node.lost",
              {{"reason", "heartbeat timeout"}, {"silent_ms", 3000}, {"member", true}}),
        event(901, "restart.decided"), event(1900, "round.started"), event(2000, "run.completed")})
    metrics.on_event(e);
  MetricsSnapshot now;
  now.runs.push_back({"job", "running", 2, 2, 3, 4, 17});
  now.runs.push_back({"moved", "running", 4, 0, 3, 1, 1, 3, "gpu-1:29400"});
  now.moved_runs["left"] = "node2:29400";
  now.nodes.push_back({"job", "a:1", "member", 0.25});
  now.nodes.push_back({"job", "b:1", "member", 1.5});
  now.control_connections = 2;
  now.control_connections_accepted = 41;
  now.store_budget_bytes = uint64_t{4} << 30;
  now.store_budget_used_bytes = 1500;
  std::string text = metrics.render(now);
  CHECK(has_line(text, "cohort_runs{phase=\"running\"} 2"));
  CHECK(has_line(text, "cohort_runs{phase=\"forming\"} 0"));
  CHECK(has_line(text, "cohort_run_restarts_left{run=\"job\"} 1"));
  // A run taken over says so; one that began here has no sample.
  CHECK(has_line(text, "cohort_run_resumed_after_round{run=\"moved\",from=\"gpu-1:29400\"} 3"));
  CHECK(text.find("cohort_run_resumed_after_round{run=\"job\"") == std::string::npos);
  // A run whose nodes all left for another endpoint says where.
  CHECK(has_line(text, "cohort_run_moved{run=\"left\",to=\"node2:29400\"} 1"));
  CHECK(text.find("cohort_run_moved{run=\"job\"") == std::string::npos);
  CHECK(has_line(text, "cohort_nodes{run=\"job\",state=\"member\"} 2"));
  CHECK(has_line(text, "cohort_node_heartbeat_age_seconds{run=\"job\",node=\"b:1\"} 1.5"));
  CHECK(has_line(text, "cohort_store_operations{run=\"job\"} 17"));
  CHECK(has_line(text, "cohort_store_budget_bytes 4294967296"));
  CHECK(has_line(text, "cohort_store_budget_used_bytes 1500"));
  CHECK(has_line(text, "cohort_control_connections_accepted_total 41"));
  CHECK(has_line(text, "cohort_rounds_started_total 3"));
  CHECK(has_line(text, "cohort_restarts_total 2"));
  CHECK(has_line(text, "cohort_worker_failures_total 1"));
  CHECK(has_line(text, "cohort_nodes_lost_total{reason=\"heartbeat_timeout\"} 1"));
  CHECK(has_line(text, "cohort_runs_ended_total{outcome=\"completed\"} 1"));
  CHECK(has_line(text, "cohort_loss_detect_seconds_bucket{le=\"2.5\"} 0"));
  CHECK(has_line(text, "cohort_loss_detect_seconds_bucket{le=\"5\"} 1"));
  // 300 ms after the failure, 1000 ms after the loss (not after the restart decided later).
  CHECK(has_line(text, "cohort_recover_seconds_count 2"));
  CHECK(has_line(text, "cohort_recover_seconds_sum 1.3"));
  CHECK(has_line(text, "cohort_recover_seconds_bucket{le=\"0.5\"} 1"));
}

TEST_CASE("loss reasons become a few fixed label values", "[unit][rendezvous][metrics]") {
  CHECK(DaemonMetrics::loss_class("heartbeat timeout (no frame for 3000 ms)") ==
        "heartbeat_timeout");
  CHECK(DaemonMetrics::loss_class("connection closed (End of file)") == "connection_closed");
  CHECK(DaemonMetrics::loss_class("anything \"else\"") == "other");
}

TEST_CASE("a scale-up's new round is no recovery", "[unit][rendezvous][metrics]") {
  DaemonMetrics metrics;
  for (const json& e : {event(0, "run.created"), event(10, "round.started"),
                        event(500, "restart.decided",
                              {{"reason", "scale-up: new nodes joined"}, {"scale_up", true}}),
                        event(900, "round.started")})
    metrics.on_event(e);
  std::string text = metrics.render(MetricsSnapshot{});
  CHECK(has_line(text, "cohort_recover_seconds_count 0"));
}

TEST_CASE("a run that goes away is forgotten: a later run of its id times no stale recovery",
          "[unit][rendezvous][metrics]") {
  DaemonMetrics metrics;
  // The run's only node says hello and closes before a round: a loss, then the run is reaped.
  for (const json& e :
       {event(0, "run.created"), event(5, "node.lost", {{"reason", "connection closed (eof)"}})})
    metrics.on_event(e);
  metrics.forget_run("job");
  for (const json& e : {event(60000, "run.created"), event(60010, "round.started")})
    metrics.on_event(e);
  CHECK(has_line(metrics.render(MetricsSnapshot{}), "cohort_recover_seconds_count 0"));
}

TEST_CASE("a run whose nodes all went counts as ended, abandoned", "[unit][rendezvous][metrics]") {
  DaemonMetrics metrics;
  for (const json& e : {event(0, "run.created"), event(10, "round.started"),
                        event(500, "run.abandoned", {{"reason", "its last node left"}})})
    metrics.on_event(e);
  std::string text = metrics.render(MetricsSnapshot{});
  CHECK(has_line(text, "cohort_runs_ended_total{outcome=\"abandoned\"} 1"));
  CHECK(has_line(text, "cohort_runs_ended_total{outcome=\"completed\"} 0"));
}

TEST_CASE("the loss of a pending node or a spare times no recovery",
          "[unit][rendezvous][metrics]") {
  DaemonMetrics metrics;
  json lost{{"reason", "connection closed (eof)"}, {"silent_ms", 1}};
  for (const json& e :
       {event(0, "run.created"), event(5, "node.lost", lost), event(3300, "round.started"),
        event(5000, "node.lost", lost), event(9000, "worker.failed"),
        event(9001, "restart.decided", {{"reason", "worker failed"}}),
        event(9101, "round.started")})
    metrics.on_event(e);
  std::string text = metrics.render(MetricsSnapshot{});
  CHECK(has_line(text, "cohort_nodes_lost_total{reason=\"connection_closed\"} 2"));
  CHECK(has_line(text, "cohort_recover_seconds_count 1"));
  CHECK(has_line(text, "cohort_recover_seconds_sum 0.1"));  // from the restart decided
}
