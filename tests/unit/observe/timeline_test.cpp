#include "observe/timeline.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <iterator>

#include "observe/event_text.hpp"
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
          event(3000, "node.lost", {{"node", "c"}, {"reason", "closed"}, {"member", true}}),
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
  // Completed after two recoveries: the last failure, said as recovered from.
  CHECK(html.find("<p id=\"root-cause\"><b>last failure (recovered from):</b> node lost</p>") !=
        std::string::npos);
}

TEST_CASE("HTML escaping shows control characters as U+FFFD and keeps line breaks and UTF-8",
          "[unit][observe]") {
  // A node id is what its agent sent: raw control characters make no valid HTML (or SVG).
  const std::string replaced = "\xef\xbf\xbd";  // U+FFFD
  CHECK(html_escape("a\x1b[2Jb\x07"
                    "c\x7f") == "a" + replaced + "[2Jb" + replaced + "c" + replaced);
  CHECK(html_escape("one\ttwo\r\nthree \xc3\xa9") == "one\ttwo\r\nthree \xc3\xa9");
  CHECK(html_escape("<a href='x'>&</a>") == "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;");
}

namespace {

// Node "127.0.0.2:1:1#0" runs alone; "127.0.0.3:2:2#0" joins (a scale-up), fails twice and its
// host is excluded; the run fails.
std::vector<json> scale_up_and_exclusion() {
  const std::string a = "127.0.0.2:1:1#0", b = "127.0.0.3:2:2#0";
  json one = json::array(
      {{{"node", a}, {"address", "127.0.0.2"}, {"group_rank", 0}, {"local_world_size", 1}}});
  json two = one;
  two.push_back(
      {{"node", b}, {"address", "127.0.0.3"}, {"group_rank", 1}, {"local_world_size", 1}});
  return {event(1000, "run.created"),
          event(1010, "node.joined", {{"node", a}, {"address", "127.0.0.2"}}),
          event(1100, "round.started", {{"round", 0}, {"world_size", 1}, {"members", one}}),
          event(1500, "node.joined", {{"node", b}, {"address", "127.0.0.3"}}),
          event(2000, "restart.decided",
                {{"round", 0}, {"reason", "scale-up: new nodes joined"}, {"scale_up", true}}),
          event(2100, "round.started", {{"round", 1}, {"world_size", 2}, {"members", two}}),
          event(2500, "worker.failed",
                {{"node", b}, {"host", "node-b"}, {"rank", 1}, {"status", "exit code 1"}}),
          event(2501, "restart.decided",
                {{"round", 1}, {"reason", "worker rank 1 on node-b failed with exit code 1"}}),
          event(2600, "host.excluded",
                {{"host", "127.0.0.3"}, {"failures", 2}, {"cooldown_ms", 60000}}),
          event(2700, "round.started", {{"round", 2}, {"world_size", 1}, {"members", one}}),
          event(3000, "run.failed",
                {{"reason", "worker rank 0 on 127.0.0.2 failed with exit code 2\nmore"},
                 {"exit_status", 2}})};
}

}  // namespace

TEST_CASE("a scale-up is no recovery, an exclusion is marked, nodes are named by host",
          "[unit][observe]") {
  Timeline timeline = build_timeline("job", scale_up_and_exclusion(), 9999);
  CHECK(timeline.scale_ups == 1);
  REQUIRE(timeline.recoveries.size() == 1);
  CHECK(timeline.recoveries[0].from_ms == 2501);
  CHECK(timeline.labels == std::vector<std::string>{"127.0.0.2", "node-b (127.0.0.3)"});
  bool excluded = false, scale_up = false;
  for (const TimelineMark& mark : timeline.marks) {
    if (mark.kind == TimelineMark::Kind::Excluded) {
      excluded = true;
      CHECK(mark.node == "127.0.0.3:2:2#0");
      CHECK(mark.text == "host 127.0.0.3 excluded for 60 s after 2 root-cause failures");
    }
    if (mark.kind == TimelineMark::Kind::ScaleUp) scale_up = true;
    CHECK_FALSE((mark.kind == TimelineMark::Kind::Restart && mark.t_ms == 2000));
  }
  CHECK(excluded);
  CHECK(scale_up);
  CHECK(timeline.root_cause == "worker rank 0 on 127.0.0.2 failed with exit code 2");
}

TEST_CASE("the run page has a legend, host labels and the root cause under its title",
          "[unit][observe]") {
  std::vector<json> events = scale_up_and_exclusion();
  std::string html = render_run_page(build_timeline("job", events, 5000), events);
  CHECK(html.find("<p id=\"root-cause\"><b>root cause:</b> worker rank 0 on 127.0.0.2 failed "
                  "with exit code 2</p>") != std::string::npos);
  CHECK(html.find("id=\"legend\"") != std::string::npos);
  for (const char* kind : {"failure", "lost", "hang", "straggler", "unhealthy", "excluded",
                           "restart", "scaleup", "end"}) {
    INFO(kind);
    CHECK(html.find(std::string("class=\"") + kind + "\"") != std::string::npos);
  }
  CHECK(html.find("1 recovery, 1 scale-up") != std::string::npos);
  CHECK(html.find(">node-b (127.0.0.3)<title>node 127.0.0.3:2:2#0</title></text>") !=
        std::string::npos);
  CHECK(html.find("class=\"mark excluded\"") != std::string::npos);
  // The events table reads as words: members as rank ranges, not JSON.
  CHECK(html.find("127.0.0.2 rank 0, 127.0.0.3 rank 1") != std::string::npos);
  CHECK(html.find("members=") == std::string::npos);
}

TEST_CASE("the run page of a run taken over says after which round and where it ran",
          "[unit][observe]") {
  std::vector<json> events = {
      event(1000, "run.created"),
      event(1100, "round.started",
            {{"round", 4},
             {"world_size", 4},
             {"members", members({"a", "b"})},
             {"resumed_after", 3},
             {"moved_from", "gpu-1:29400<b>"}}),
      event(1500, "round.started", {{"round", 5}, {"world_size", 4}, {"members", members({"a"})}})};
  Timeline timeline = build_timeline("job", events, 2000);
  CHECK(timeline.resumed ==
        "resumed here after round 3, which ran at gpu-1:29400<b> (--rdzv-fallback)");
  std::string html = render_run_page(timeline, events);
  CHECK(html.find("<p id=\"resumed\">resumed here after round 3, which ran at "
                  "gpu-1:29400&lt;b&gt; (--rdzv-fallback)</p>") != std::string::npos);
  CHECK(build_timeline("job", scripted_run(), 9000).resumed.empty());
  CHECK(render_run_page(build_timeline("job", scripted_run(), 9000), scripted_run())
            .find("id=\"resumed\"") == std::string::npos);
}

TEST_CASE("the collective a hang was attributed to is a mark of the round and a line of events",
          "[unit][observe][hang]") {
  std::vector<json> events = scripted_run();
  std::string text =
      "all_reduce #120 on default_pg (4 ranks): 3 ranks enqueued it and wait; rank 1 (node-a) "
      "never did, its last was #119 (all_reduce)";
  events.insert(
      events.begin() + 3,
      event(2200, "hang.attributed",
            {{"round", 0}, {"classification", "missing"}, {"culprit_ranks", "1"}, {"text", text}}));
  Timeline timeline = build_timeline("job", events, 9999);
  auto mark = std::find_if(timeline.marks.begin(), timeline.marks.end(),
                           [](const auto& mark) { return mark.kind == TimelineMark::Kind::Hang; });
  REQUIRE(mark != timeline.marks.end());
  CHECK(mark->text == "collective: " + text);
  CHECK(mark->node.empty());  // the round's, not one node's
  CHECK(event_line(events[3]).find("hang.attributed  missing: all_reduce #120 on default_pg") !=
        std::string::npos);
}

TEST_CASE("a node's hang mark names the silent local rank and its host and step",
          "[unit][observe][hang]") {
  std::vector<json> events = scripted_run();
  events.insert(events.begin() + 5, event(1900, "hang.detected",
                                          {{"node", "b"},
                                           {"host", "vm-b"},
                                           {"round", 0},
                                           {"local_rank", 1},
                                           {"step", 120},
                                           {"silent_ms", 30000}}));
  events.insert(events.begin() + 6,  // before its first step: no step to say, nor a host
                event(1950, "hang.detected", {{"node", "c"}, {"round", 0}, {"local_rank", 0}}));
  Timeline timeline = build_timeline("job", events, 9999);
  std::vector<TimelineMark> hangs;
  std::copy_if(timeline.marks.begin(), timeline.marks.end(), std::back_inserter(hangs),
               [](const auto& mark) { return mark.kind == TimelineMark::Kind::Hang; });
  REQUIRE(hangs.size() == 2);
  CHECK(hangs[0].node == "b");
  CHECK(hangs[0].text == "local rank 1 on vm-b hung at step 120");
  CHECK(hangs[1].node == "c");
  CHECK(hangs[1].text == "local rank 0 on c hung");
  CHECK(render_run_page(timeline, events).find("rank -1") == std::string::npos);
}

TEST_CASE("the runs page says where a run taken over came from and where a run moved to",
          "[unit][observe]") {
  cohort::proto::StatusRun run{"job", "running", 4, 0, 1, 1, 2, 0, {}};
  run.resumed_after = 3;
  run.moved_from = "gpu-1:29400";
  cohort::proto::StatusReply status{29400, {run}};
  status.moved_runs.push_back({"old<i>", "gpu-2:29400"});
  std::string html = render_runs_page(status, {});
  CHECK(html.find("<small class=\"resumed\">resumed here after round 3, which ran at "
                  "gpu-1:29400 (--rdzv-fallback)</small>") != std::string::npos);
  CHECK(html.find("<p class=\"moved\">run old&lt;i&gt; moved to gpu-2:29400 (its nodes left this "
                  "daemon for it)</p>") != std::string::npos);
  status.runs.clear();
  CHECK(render_runs_page(status, {}).find("moved to gpu-2:29400") != std::string::npos);
}

TEST_CASE("a run whose nodes all went ends at its run.abandoned, not now", "[unit][observe]") {
  std::vector<json> events = scripted_run();
  events.resize(8);  // round 1 runs; then its nodes all go
  events.push_back(event(2600, "node.left", {{"node", "a"}, {"reason", "SIGTERM"}}));
  events.push_back(event(2601, "run.abandoned", {{"round", 1}, {"reason", "its last node left"}}));
  Timeline timeline = build_timeline("job", events, 90000);
  CHECK(timeline.outcome == "abandoned");
  CHECK(timeline.end_ms == 2601);
  REQUIRE(timeline.rounds.size() == 2);
  CHECK(timeline.rounds[1].end_ms == 2601);
  REQUIRE_FALSE(timeline.marks.empty());
  CHECK(timeline.marks.back().kind == TimelineMark::Kind::End);
  CHECK(timeline.marks.back().text == "abandoned: its last node left");
  // Its last failure stays, not said as recovered from nor as the cause of its end.
  CHECK(timeline.root_cause == "worker failed");
  std::string html = render_run_page(timeline, events);
  CHECK(html.find("<h1>run job: abandoned</h1>") != std::string::npos);
  CHECK(html.find("<p id=\"root-cause\"><b>last failure:</b> worker failed</p>") !=
        std::string::npos);
  CHECK(event_line(events.back()).find("run.abandoned  its last node left") != std::string::npos);
}

TEST_CASE("the loss of a pending node or a spare starts no recovery", "[unit][observe]") {
  json one = members({"a"});
  std::vector<json> events{
      event(1000, "run.created"),
      event(1010, "node.joined", {{"node", "a"}}),
      event(1020, "node.joined", {{"node", "p"}}),
      event(1030, "node.lost", {{"node", "p"}, {"reason", "connection closed"}}),  // pending
      event(4300, "round.started", {{"round", 0}, {"world_size", 2}, {"members", one}}),
      event(5000, "node.joined", {{"node", "s"}}),
      event(5100, "node.lost", {{"node", "s"}, {"reason", "connection closed"}}),  // a spare
      event(9000, "worker.failed", {{"node", "a"}, {"rank", 0}, {"status", "exit code 1"}}),
      event(9001, "restart.decided", {{"reason", "worker failed"}}),
      event(9100, "round.started", {{"round", 1}, {"world_size", 2}, {"members", one}})};
  Timeline timeline = build_timeline("job", events, 9500);
  REQUIRE(timeline.recoveries.size() == 1);
  CHECK(timeline.recoveries[0].from_ms == 9001);  // the restart, not the spare's loss
  CHECK(timeline.recoveries[0].to_ms == 9100);
  CHECK(std::count_if(timeline.marks.begin(), timeline.marks.end(),
                      [](const auto& mark) { return mark.kind == TimelineMark::Kind::Lost; }) == 2);
}

TEST_CASE("a run page of 6,000 nodes puts each node's bars on its own row", "[unit][observe]") {
  constexpr int kNodes = 6000;
  std::vector<std::string> names;
  for (int i = 0; i < kNodes; ++i) names.push_back("node-" + std::to_string(i));
  std::vector<json> events{event(1000, "run.created")};
  for (const std::string& name : names)
    events.push_back(event(1001, "node.joined", {{"node", name}}));
  events.push_back(event(1100, "round.started",
                         {{"round", 0}, {"world_size", 2 * kNodes}, {"members", members(names)}}));
  Timeline timeline = build_timeline("job", events, 5000);
  REQUIRE(timeline.nodes.size() == kNodes);
  CHECK(timeline.rows.at("node-4321") == 4321u);
  std::string html = render_run_page(timeline, events);
  // Rows are 28 px apart below a 36 px margin; a bar sits 4 px into its row.
  for (int row : {0, 1, 4321, kNodes - 1}) {
    INFO("row " << row);
    std::string bar = "data-node=\"node-" + std::to_string(row) + "\" x=\"";
    size_t at = html.find(bar);
    REQUIRE(at != std::string::npos);
    size_t y = html.find("y=\"", at);
    CHECK(html.substr(y + 3, html.find('"', y + 3) - y - 3) == std::to_string(36 + row * 28 + 4));
  }
}
