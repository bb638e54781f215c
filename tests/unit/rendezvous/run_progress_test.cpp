// The workers' progress across nodes, with a fake clock: the rank that went silent first is the
// root cause of a hang whichever node declared it, ages are turned into the daemon's own time on
// receipt, the slowest ranks against the median, and stragglers named once they stay slow for
// the window.
#include <catch2/catch.hpp>
#include <map>

#include "rendezvous/run_state.hpp"

using namespace cohort::rdzv;
using namespace std::chrono_literals;

namespace {

// Two nodes of two ranks each, in round 0: "a" (127.0.0.2) has ranks 0-1, "b" (127.0.0.3) 2-3.
struct TwoNodes {
  TimePoint now = TimePoint(std::chrono::hours(1));
  RunConfig config{2, 2, 1, 1000ms, 10000ms, 3000ms};
  RunState run{"job", config, now};

  TwoNodes() {
    run.join(NodeInfo{"a", "127.0.0.2", 2, std::nullopt, -1, 0}, config, now);
    Actions actions = run.join(NodeInfo{"b", "127.0.0.3", 2, std::nullopt, -1, 0}, config, now);
    REQUIRE(run.phase() == RunState::Phase::Running);
  }
  // A report from `node`: each rank's silence (ms) and step; step times in `step_ms`.
  Actions report(const std::string& node, std::vector<int64_t> silent_ms,
                 std::vector<int> steps = {}, std::vector<int64_t> step_ms = {},
                 bool hang = false) {
    ProgressReport report{0, hang, 2000ms, 150, node == "a" ? "node-a" : "node-b", {}};
    for (size_t i = 0; i < silent_ms.size(); ++i) {
      RankReport rank{static_cast<int>(i), Ms(silent_ms[i]), std::nullopt, std::nullopt};
      if (i < steps.size()) rank.step = steps[i];
      if (i < step_ms.size()) rank.step_time = Ms(step_ms[i]);
      report.ranks.push_back(rank);
    }
    return run.progress(node, report, now);
  }
  Actions fail(const std::string& node, int rank) {
    return run.worker_failed(
        node, FailureReport{0, rank, rank % 2, 134, "signal 6 (SIGABRT)", "node-" + node, "SUM\n"},
        now);
  }
};

// One node, "a" (127.0.0.1, host "vm"), of `ranks` ranks, in round 0, stragglers named after 3 s.
struct OneNode {
  TimePoint now = TimePoint(std::chrono::hours(1));
  RunConfig config{1, 1, 0, 1000ms, 10000ms, 3000ms};
  RunState run{"job", config, now};

  explicit OneNode(int ranks) {
    run.join(NodeInfo{"a", "127.0.0.1", ranks, std::nullopt, -1, 0}, config, now);
    REQUIRE(run.phase() == RunState::Phase::Running);
    run.set_straggler_window(3s);
  }
  // A report that lists the ranks still running, by local rank, with their step times (ms), as
  // the agent sends it: every running rank, with its last step time, each time.
  Actions report(const std::map<int, int64_t>& step_ms) {
    ProgressReport report{0, false, 2000ms, 150, "vm", {}};
    for (const auto& [local, ms] : step_ms) report.ranks.push_back({local, 10ms, 8, Ms(ms)});
    return run.progress("a", report, now);
  }
};

template <typename T>
std::optional<T> find(const Actions& actions) {
  for (const auto& action : actions) {
    if (auto* found = std::get_if<T>(&action)) return *found;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("a hang on node b is named by the rank that went silent first, on every node",
          "[unit][rendezvous][hang]") {
  TwoNodes f;
  f.report("a", {10, 20}, {30, 30});
  f.now += 1500ms;
  // Node a's ranks went quiet 1 s ago; b's rank 3 went quiet 2 s ago, at step 3, and b says so.
  f.report("a", {1000, 1000}, {30, 30});
  f.now += 500ms;
  f.report("b", {100, 2000}, {31, 3}, {}, /*hang=*/true);
  Actions actions = f.fail("b", 3);
  std::optional<RestartMembers> restart = find<RestartMembers>(actions);
  REQUIRE(restart);
  CHECK(restart->node_ids.size() == 2);
  CHECK(restart->reason.find("rank 3 on node-b (127.0.0.3) stopped making progress at step 3; "
                             "2 ranks waited on it; 1 rank still made progress (worker rank 3 on "
                             "node-b failed with signal 6 (SIGABRT))") == 0);
}

TEST_CASE("the root cause is the earliest silence even when another node declares the hang",
          "[unit][rendezvous][hang]") {
  TwoNodes f;
  // b's rank 2 went silent 4 s ago at step 7 (reported periodically, before b noticed); a
  // declares its own rank 1, silent for 3.5 s: rank 2 is still the one that stopped first.
  f.report("b", {3000, 50}, {7, 40});
  f.now += 1000ms;
  f.report("a", {200, 3500}, {41, 9}, {}, /*hang=*/true);
  Actions actions = f.fail("a", 1);
  std::optional<RestartMembers> restart = find<RestartMembers>(actions);
  REQUIRE(restart);
  CHECK(restart->reason.find("rank 2 on node-b (127.0.0.3) stopped making progress at step 7;") ==
        0);
}

TEST_CASE("with the budget spent the summary every node prints ends with the root cause",
          "[unit][rendezvous][hang]") {
  TimePoint now = TimePoint(std::chrono::hours(1));
  RunConfig config{2, 2, 0, 1000ms, 10000ms, 3000ms};
  RunState run("job", config, now);
  run.join(NodeInfo{"a", "127.0.0.2", 1, std::nullopt, -1, 0}, config, now);
  run.join(NodeInfo{"b", "127.0.0.3", 1, std::nullopt, -1, 0}, config, now);
  run.progress("a", ProgressReport{0, false, 2000ms, 150, "vm", {{0, 500ms, 12, std::nullopt}}},
               now);
  run.progress("b", ProgressReport{0, true, 2000ms, 150, "vm", {{0, 2100ms, 4, std::nullopt}}},
               now);
  Actions actions =
      run.worker_failed("b", FailureReport{0, 1, 0, 134, "signal 6 (SIGABRT)", "vm", "SUM\n"}, now);
  std::optional<StopRun> stop = find<StopRun>(actions);
  REQUIRE(stop);
  CHECK(stop->node_ids.size() == 2);
  CHECK(stop->summary ==
        "SUM\nroot cause across nodes: rank 1 on vm (127.0.0.3) stopped making progress at step 4; "
        "1 rank waited on it\n");
}

TEST_CASE("a failure that is not a hang says nothing of silence, and reports are bounded",
          "[unit][rendezvous][hang]") {
  TwoNodes f;
  f.report("a", {5000, 5000}, {1, 1});
  // Ranks beyond the node's two, another round, a node that is not a member: ignored.
  f.report("b", {0, 0, 99999, 99999});
  f.run.progress("zz", ProgressReport{0, true, 2000ms, 150, "x", {{0, 99999ms, 1, {}}}}, f.now);
  f.run.progress("b", ProgressReport{5, true, 2000ms, 150, "x", {{0, 99999ms, 1, {}}}}, f.now);
  CHECK_FALSE(f.run.worker_progress().hang_declared());
  std::optional<RestartMembers> restart = find<RestartMembers>(f.fail("a", 0));
  REQUIRE(restart);
  CHECK(restart->reason.find("worker rank 0 on node-a failed with") == 0);
}

TEST_CASE("a new round forgets the last round's progress", "[unit][rendezvous][hang]") {
  TwoNodes f;
  f.report("a", {100, 100}, {1, 1}, {300, 300});
  CHECK(f.run.worker_progress().median_step_time() == 300ms);
  f.fail("a", 0);
  f.now += 5000ms;
  f.run.join(NodeInfo{"a", "127.0.0.2", 2, std::nullopt, -1, 0}, f.config, f.now);
  f.run.join(NodeInfo{"b", "127.0.0.3", 2, std::nullopt, -1, 0}, f.config, f.now);
  REQUIRE(f.run.round() == 1);
  CHECK_FALSE(f.run.worker_progress().median_step_time());
  CHECK(f.run.worker_progress().slowest().empty());
}

TEST_CASE("the slowest ranks against the median step time", "[unit][rendezvous][straggler]") {
  TwoNodes f;
  f.report("a", {10, 10}, {5, 5}, {100, 110});
  f.report("b", {10, 10}, {5, 4}, {105, 300});
  const RunProgress& progress = f.run.worker_progress();
  CHECK(progress.median_step_time() == 105ms);  // the lower median of an even count
  std::vector<SlowRank> slowest = progress.slowest(2);
  REQUIRE(slowest.size() == 2);
  CHECK(slowest[0].rank == 3);
  CHECK(slowest[0].node == "node-b (127.0.0.3)");
  CHECK(slowest[0].step_time == 300ms);
  CHECK(slowest[1].rank == 1);
}

TEST_CASE("a straggler is named once it stays slower than the factor for the window",
          "[unit][rendezvous][straggler]") {
  TwoNodes f;
  f.run.set_straggler_window(10s);
  auto announced = [&](const Actions& actions) { return find<Announce>(actions); };
  CHECK_FALSE(announced(f.report("a", {10, 10}, {5, 5}, {100, 100})));
  CHECK_FALSE(announced(f.report("b", {10, 10}, {5, 4}, {100, 160})));  // 1.6 x: slow from now
  f.now += 9s;
  CHECK_FALSE(announced(f.report("b", {10, 10}, {5, 4}, {100, 160})));
  f.now += 1s;
  std::optional<Announce> line = announced(f.report("b", {10, 10}, {5, 4}, {100, 160}));
  REQUIRE(line);
  CHECK(line->text ==
        "rank 3 on node-b (127.0.0.3) is a straggler: 0.160 s per step, 1.60 x the run's median "
        "0.100 s, for 10.000 s (--straggler-factor 1.5)");
  f.now += 1s;
  CHECK_FALSE(announced(f.report("b", {10, 10}, {5, 4}, {100, 160})));  // named once
  // Back within the factor, then slow again: the window starts over.
  CHECK_FALSE(announced(f.report("b", {10, 10}, {5, 4}, {100, 140})));
  CHECK_FALSE(announced(f.report("b", {10, 10}, {5, 4}, {100, 200})));
  f.now += 10s;
  CHECK(announced(f.report("b", {10, 10}, {5, 4}, {100, 200})));
}

TEST_CASE("a hang counts against the host of the rank that went silent first",
          "[unit][rendezvous][hang][exclusion]") {
  TimePoint now = TimePoint(std::chrono::hours(1));
  RunConfig config{2, 2, 3, 1000ms, 10000ms, 3000ms, /*host_failure_limit=*/1, 60s};
  RunState run("job", config, now);
  run.join(NodeInfo{"a", "127.0.0.2", 1, std::nullopt, -1, 0}, config, now);
  run.join(NodeInfo{"b", "127.0.0.3", 1, std::nullopt, -1, 0}, config, now);
  run.join(NodeInfo{"s", "127.0.0.4", 1, std::nullopt, -1, 0}, config, now);  // a spare
  // b's rank went silent first; a is the node that declares the hang and reports the failure.
  run.progress("b", ProgressReport{0, false, 2000ms, 150, "node-b", {{0, 3000ms, 7, {}}}}, now);
  run.progress("a", ProgressReport{0, true, 2000ms, 150, "node-a", {{0, 2100ms, 9, {}}}}, now);
  Actions actions = run.worker_failed(
      "a", FailureReport{0, 0, 0, 134, "signal 6 (SIGABRT)", "node-a", "SUM\n"}, now);
  for (const char* id : {"a", "b"}) {  // ruled on once the members are back from the restart
    Actions more = run.join(
        NodeInfo{id, id[0] == 'a' ? "127.0.0.2" : "127.0.0.3", 1, std::nullopt, 0, 0}, config, now);
    actions.insert(actions.end(), more.begin(), more.end());
  }
  std::optional<HostExcluded> excluded = find<HostExcluded>(actions);
  REQUIRE(excluded);
  CHECK(excluded->host == "127.0.0.3");
}

TEST_CASE("a rank that ended on its own is not the root cause of a later hang",
          "[unit][rendezvous][hang]") {
  TimePoint now = TimePoint(std::chrono::hours(1));
  RunConfig config{1, 1, 0, 1000ms, 10000ms, 3000ms};
  RunState run("job", config, now);
  run.join(NodeInfo{"a", "127.0.0.1", 2, std::nullopt, -1, 0}, config, now);
  // Both ranks beat step 4; rank 0 a few ms before rank 1. Rank 0 then finishes (the agent
  // leaves it out of its reports) and rank 1 wedges: rank 1 is the one that hung.
  run.progress(
      "a", ProgressReport{0, false, 2000ms, 150, "vm", {{0, 60ms, 4, {}}, {1, 50ms, 4, {}}}}, now);
  now += 2000ms;
  run.progress("a", ProgressReport{0, true, 2000ms, 150, "vm", {{1, 2050ms, 4, {}}}}, now);
  Actions actions =
      run.worker_failed("a", FailureReport{0, 1, 1, 134, "signal 6 (SIGABRT)", "vm", "SUM\n"}, now);
  std::optional<StopRun> stop = find<StopRun>(actions);
  REQUIRE(stop);
  CHECK(
      stop->summary ==
      "SUM\nroot cause across nodes: rank 1 on vm (127.0.0.1) stopped making progress at step 4\n");
}

TEST_CASE("of two ranks the one five times slower is named a straggler against the faster",
          "[unit][rendezvous][straggler]") {
  OneNode f(2);
  CHECK_FALSE(find<Announce>(f.report({{0, 50}, {1, 250}})));
  // The median `cohort status` shows is the one stragglers are measured against: of two ranks,
  // the faster's (the upper one would be the slow rank itself, never above 1.5 x itself).
  CHECK(f.run.worker_progress().median_step_time() == 50ms);
  f.now += 3s;
  std::optional<Announce> line = find<Announce>(f.report({{0, 50}, {1, 250}}));
  REQUIRE(line);
  CHECK(line->text ==
        "rank 1 on vm (127.0.0.1) is a straggler: 0.250 s per step, 5.00 x the run's median "
        "0.050 s, for 3.000 s (--straggler-factor 1.5)");
}

TEST_CASE("two ranks at the same pace are no stragglers", "[unit][rendezvous][straggler]") {
  OneNode f(2);
  CHECK_FALSE(find<Announce>(f.report({{0, 250}, {1, 250}})));
  f.now += 5s;
  CHECK_FALSE(find<Announce>(f.report({{0, 250}, {1, 260}})));
  CHECK(f.run.worker_progress().median_step_time() == 250ms);
}

TEST_CASE("a slow rank that ended before the window passed is never named a straggler",
          "[unit][rendezvous][straggler]") {
  OneNode f(3);
  CHECK_FALSE(find<Announce>(f.report({{0, 50}, {1, 50}, {2, 250}})));  // rank 2: slow from now
  f.now += 2s;
  // Rank 2 exited: the agent's reports leave it out from now on.
  CHECK_FALSE(find<Announce>(f.report({{0, 50}, {1, 50}})));
  f.now += 2s;
  CHECK_FALSE(find<Announce>(f.report({{0, 50}, {1, 50}})));
  f.now += 10s;
  CHECK_FALSE(find<Announce>(f.report({{0, 50}, {1, 50}})));
  // Nor does its last step time stay among the run's: not in the median, not the slowest.
  const RunProgress& progress = f.run.worker_progress();
  CHECK(progress.median_step_time() == 50ms);
  std::vector<SlowRank> slowest = progress.slowest();
  REQUIRE(slowest.size() == 2);
  CHECK(slowest[0].step_time == 50ms);
}

TEST_CASE("a rank still reported keeps its slowness from one report to the next",
          "[unit][rendezvous][straggler]") {
  OneNode f(4);
  CHECK_FALSE(find<Announce>(f.report({{0, 50}, {1, 50}, {2, 50}, {3, 250}})));
  f.now += 2s;
  CHECK_FALSE(find<Announce>(f.report({{0, 50}, {1, 50}, {2, 50}, {3, 250}})));
  f.now += 1s;
  // Rank 0 ended; rank 3, listed in every report, has been slow for the whole window.
  std::optional<Announce> line = find<Announce>(f.report({{1, 50}, {2, 50}, {3, 250}}));
  REQUIRE(line);
  CHECK(line->text.find("rank 3 on vm (127.0.0.1) is a straggler: 0.250 s per step, 5.00 x") == 0);
}
