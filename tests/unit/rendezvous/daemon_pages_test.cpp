#include "rendezvous/daemon_pages.hpp"

#include <catch2/catch.hpp>

using namespace cohort;
using nlohmann::json;

namespace {

DaemonView view_of_one_run() {
  proto::StatusRun run{"job 1", "running", 0, 0, 3, 1, 2, 0, {}};
  run.nodes.push_back({"a:1:1#0", "10.0.0.2", "member", 0, 2, false, 100});
  proto::StatusReply status{29400, {run}};
  std::vector<json> events{{{"t_ms", 1000}, {"event", "run.created"}, {"run", "job 1"}},
                           {{"t_ms", 1100},
                            {"event", "round.started"},
                            {"run", "job 1"},
                            {"round", 0},
                            {"members", json::array({{{"node", "a:1:1#0"}, {"group_rank", 0}}})}}};
  return DaemonView{
      [status] { return status; },
      [] {
        MetricsSnapshot snapshot;
        snapshot.runs.push_back({"job 1", "running", 0, 0, 3, 2, 40});
        return snapshot;
      },
      [events](const std::string& run) { return run == "job 1" ? events : std::vector<json>{}; },
      [] { return int64_t{2000}; }, [] { return std::vector<std::string>{"old <run>"}; }};
}

}  // namespace

TEST_CASE("the daemon's pages: metrics, runs, a run's timeline and JSON, 404 otherwise",
          "[unit][rendezvous][http]") {
  DaemonMetrics metrics;
  DaemonPages pages(view_of_one_run(), metrics);
  auto metrics_page = pages.answer("/metrics?x=1");
  CHECK(metrics_page.status == 200);
  CHECK(metrics_page.content_type == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(metrics_page.body.find("cohort_store_operations{run=\"job 1\"} 40\n") != std::string::npos);
  auto index = pages.answer("/");
  CHECK(index.content_type == "text/html; charset=utf-8");
  CHECK(index.body.find("href=\"/runs/job 1\"") != std::string::npos);
  CHECK(index.body.find("<li><a href=\"/runs/old &lt;run&gt;\">") != std::string::npos);
  auto run = pages.answer("/runs/job%201");
  CHECK(run.status == 200);
  CHECK(run.body.find("data-round=\"0\" data-node=\"a:1:1#0\"") != std::string::npos);
  auto api = pages.answer("/api/runs/job%201");
  REQUIRE(api.status == 200);
  json parsed = json::parse(api.body);
  CHECK(parsed["events"].size() == 2);
  CHECK(parsed["status"]["nodes"][0]["heartbeat_age_ms"] == 100);
  CHECK(json::parse(pages.answer("/api/runs").body)["runs"][0]["run_id"] == "job 1");
  CHECK(pages.answer("/runs/other").status == 404);
  CHECK(pages.answer("/api/runs/other").status == 404);
  CHECK(pages.answer("/favicon.ico").status == 404);
  CHECK(pages.answer("/runs/%zz").status == 404);
}

TEST_CASE("a 404 body echoes the asked path with its control bytes escaped",
          "[unit][rendezvous][http]") {
  DaemonMetrics metrics;
  DaemonPages pages(view_of_one_run(), metrics);
  for (const char* target : {"/runs/a%0d%0aSet-Cookie:%20x%00%1b]0;t%07", "/api/runs/a%0d%0ab"}) {
    auto page = pages.answer(target);
    CHECK(page.status == 404);
    std::string body = page.body.substr(0, page.body.size() - 1);  // its own last newline
    CHECK(page.body.back() == '\n');
    for (char c : body) CHECK(static_cast<unsigned char>(c) >= 0x20);
  }
  CHECK(pages.answer("/runs/a%0d%0ab").body == "no run a\\x0d\\x0ab\n");
  CHECK(pages.answer("/x%0a").body.find("no page at /x%0a;") == 0);  // not decoded: as sent
}
