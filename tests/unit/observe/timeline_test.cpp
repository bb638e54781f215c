#include "observe/timeline.hpp"

#include <catch2/catch.hpp>

#include "observe/status_pages.hpp"

using namespace cohort::observe;
using nlohmann::json;

namespace {

json event(int64_t t, const std::string& name, json fields = json::object()) {
  fields["t_ms"] = t;
  fields["event"] = name;
  fields["run"] = "job";
  fields["source"] = "daemon";
  return fields;
}

json members(const std::vector<std::string>& nodes) {
  json list = json::array();
  for (size_t i = 0; i < nodes.size(); ++i)
    list.push_back({{"node", nodes[i]}, {"group_rank", i}, {"local_world_size", 2}});
  return list;
}

// Three nodes; a worker fails in round 0; node c is lost in round 1; round 2 completes.
std::vector<json> scripted_run() {
  return {event(1000, "run.created"),
          event(1010, "node.joined", {{"node", "a"}}),
          event(1020, "node.joined", {{"node", "b"}}),
          event(1030, "node.joined", {{"node", "c"}}),
          event(1100, "round.started",
                {{"round", 0}, {"world_size", 6}, {"members", members({"a", "b", "c"})}}),
          event(2000, "worker.failed", {{"node", "b"}, {"rank", 3}, {"status", "exit code 1"}}),
          event(2001, "restart.decided", {{"reason", "worker failed"}}),
          event(2300, "round.started",
                {{"round", 1}, {"world_size", 6}, {"members", members({"a", "b", "c"})}}),
          event(3000, "node.lost", {{"node", "c"}, {"reason", "connection closed"}}),
          event(3002, "restart.decided", {{"reason", "node lost"}}),
          event(3500, "round.started",
                {{"round", 2}, {"world_size", 4}, {"members", members({"a", "b"})}}),
          event(4000, "run.completed", {{"rounds", 3}})};
}

}  // namespace

TEST_CASE("a timeline from a run's events: rounds, members, marks and recovery times",
          "[unit][observe]") {
  Timeline timeline = build_timeline("job", scripted_run(), 9999);
  CHECK(timeline.start_ms == 1000);
  CHECK(timeline.end_ms == 4000);
  CHECK(timeline.outcome == "completed");
  CHECK(timeline.nodes == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(timeline.rounds.size() == 3);
  CHECK(timeline.rounds[0].start_ms == 1100);
  CHECK(timeline.rounds[0].end_ms == 2300);
  CHECK(timeline.rounds[1].end_ms == 3500);
  CHECK(timeline.rounds[2].end_ms == 4000);
  CHECK(timeline.rounds[2].members.size() == 2);
  CHECK(timeline.rounds[2].world_size == 4);
  REQUIRE(timeline.recoveries.size() == 2);
  CHECK(timeline.recoveries[0].to_ms - timeline.recoveries[0].from_ms == 299);
  // From the loss, not from the restart decided 2 ms later.
  CHECK(timeline.recoveries[1].to_ms - timeline.recoveries[1].from_ms == 500);
  REQUIRE(timeline.marks.size() == 5);
  CHECK(timeline.marks[0].kind == TimelineMark::Kind::Failure);
  CHECK(timeline.marks[0].node == "b");
  CHECK(timeline.marks[2].kind == TimelineMark::Kind::Lost);
  CHECK(timeline.marks[4].kind == TimelineMark::Kind::End);
}

TEST_CASE("a running run's last round lasts until now, odd events are skipped", "[unit][observe]") {
  std::vector<json> events = scripted_run();
  events.resize(8);
  events.push_back(json::array({1, 2}));
  events.push_back(event(2400, "something.new", {{"node", 7}}));
  Timeline timeline = build_timeline("job", events, 5000);
  CHECK(timeline.outcome == "running");
  CHECK(timeline.end_ms == 5000);
  REQUIRE(timeline.rounds.size() == 2);
  CHECK(timeline.rounds[1].end_ms == 5000);
}

TEST_CASE("the run page has one bar per round per node and escapes what nodes are called",
          "[unit][observe]") {
  std::vector<json> events = scripted_run();
  events.push_back(event(4001, "node.left", {{"node", "<script>x</script>"}}));
  std::string html = render_run_page(build_timeline("job", events, 5000), events);
  size_t bars = 0;
  for (size_t at = html.find("<rect class=\"round"); at != std::string::npos;
       at = html.find("<rect class=\"round", at + 1))
    ++bars;
  CHECK(bars == 3 + 3 + 2);
  CHECK(html.find("data-round=\"2\" data-node=\"b\"") != std::string::npos);
  CHECK(html.find("recovered in 299 ms") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("&lt;script&gt;") != std::string::npos);
  CHECK(html.find("http://") == html.find("http://www.w3.org/2000/svg"));  // nothing external
}
