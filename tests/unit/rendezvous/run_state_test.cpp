// The rendezvous state machine with a fake clock: every transition of DESIGN.md §3.
#include <catch2/catch.hpp>

#include "rendezvous/run_state.hpp"

using namespace cohort::rdzv;
using namespace std::chrono_literals;

namespace {

struct Fixture {
  TimePoint now = TimePoint(std::chrono::hours(1));
  RunConfig config;
  RunState run;

  explicit Fixture(int min_nodes, int max_nodes, int max_restarts = 0, Ms host_cooldown = 60s)
      : config{min_nodes, max_nodes, max_restarts, 1000ms, 10000ms, 3000ms, 2, host_cooldown},
        run("job", config, now) {}

  NodeInfo node(const std::string& id, std::optional<int> hint = std::nullopt, int nproc = 2) {
    return NodeInfo{id, "addr-" + id, nproc, hint, -1, 0};
  }
  Actions join(const std::string& id, std::optional<int> hint = std::nullopt) {
    return run.join(node(id, hint), config, now);
  }
  Actions advance(Ms by) {
    now += by;
    for (const auto& view : run.nodes()) run.heartbeat(view.info.node_id, now);
    return run.tick(now);
  }
  /// Advances 200 ms at a time until a round runs, at most `steps` times; every action seen.
  Actions advance_until_running(int steps = 50) {
    Actions seen;
    for (int i = 0; i < steps && run.phase() != RunState::Phase::Running; ++i) {
      Actions more = advance(200ms);
      seen.insert(seen.end(), more.begin(), more.end());
    }
    return seen;
  }
};

// A copy of the first action of type T (a copy, so that it outlives a temporary list).
template <typename T>
std::optional<T> find(const Actions& actions) {
  for (const auto& action : actions) {
    if (auto* found = std::get_if<T>(&action)) return *found;
  }
  return std::nullopt;
}

std::vector<std::string> member_ids(const StartRound& start) {
  std::vector<std::string> ids;
  for (const auto& member : start.members) ids.push_back(member.node_id);
  return ids;
}

FailureReport failure(int round, int status = 7) {
  return FailureReport{round, 1, 1, status, "exit code 7", "addr-a", "SUMMARY"};
}

}  // namespace

TEST_CASE("a fixed-size run forms when the last node joins", "[unit][rendezvous]") {
  Fixture f(3, 3);
  CHECK(find<StartRound>(f.join("c")) == std::nullopt);
  std::optional<WaitingStatus> waiting = find<WaitingStatus>(f.join("b"));
  REQUIRE(waiting);
  CHECK(waiting->joined == 2);
  CHECK(waiting->min_nodes == 3);
  Actions actions = f.join("a");
  std::optional<StartRound> start = find<StartRound>(actions);
  REQUIRE(start);
  CHECK(start->round == 0);
  CHECK(member_ids(*start) == std::vector<std::string>{"a", "b", "c"});  // by address
  CHECK(start->members[2].base_rank == 4);
  CHECK(start->members[2].world_size == 6);
  CHECK(start->members[1].group_world_size == 3);
  CHECK(f.run.phase() == RunState::Phase::Running);
}

TEST_CASE("rank hints decide the node order", "[unit][rendezvous]") {
  Fixture f(2, 2);
  f.join("a", 1);
  std::optional<StartRound> start = find<StartRound>(f.join("b", 0));
  REQUIRE(start);
  CHECK(member_ids(*start) == std::vector<std::string>{"b", "a"});
}

TEST_CASE("an elastic run waits for the last call after min nodes", "[unit][rendezvous]") {
  Fixture f(2, 3);
  f.join("a");
  std::optional<WaitingStatus> waiting = find<WaitingStatus>(f.join("b"));
  REQUIRE(waiting);
  REQUIRE(waiting->last_call_in);
  CHECK(*waiting->last_call_in == 1000ms);
  CHECK(f.run.next_deadline() == f.now + 1000ms);
  CHECK(find<StartRound>(f.advance(999ms)) == std::nullopt);
  std::optional<StartRound> start = find<StartRound>(f.advance(1ms));
  REQUIRE(start);
  CHECK(start->members.size() == 2);
}

TEST_CASE("reaching max closes the round at once", "[unit][rendezvous]") {
  Fixture f(1, 2);
  f.join("a");
  CHECK(find<StartRound>(f.join("b")).has_value());
}

TEST_CASE("a run that never reaches min times out for every node", "[unit][rendezvous]") {
  Fixture f(3, 3);
  f.join("a");
  f.join("b");
  CHECK(f.advance(9999ms).empty());
  Actions actions = f.advance(1ms);
  REQUIRE(actions.size() == 3);  // the run's failure, then each node's drop
  std::optional<FormingTimedOut> failed = find<FormingTimedOut>(actions);
  REQUIRE(failed);
  std::optional<DropNode> drop = find<DropNode>(actions);
  REQUIRE(drop);
  CHECK(drop->reason.find("2 of at least 3 nodes") != std::string::npos);
  CHECK(failed->reason == drop->reason);
  CHECK(f.run.phase() == RunState::Phase::Failed);
  CHECK(f.run.empty());
}

TEST_CASE("settings that disagree are refused with the flag named", "[unit][rendezvous]") {
  Fixture f(2, 2);
  f.join("a");
  RunConfig other = f.config;
  other.max_nodes = 3;
  Actions actions = f.run.join(f.node("b"), other, f.now);
  std::optional<DropNode> drop = find<DropNode>(actions);
  REQUIRE(drop);
  CHECK(drop->reason.find("--nnodes 2:3 differs from the run's 2") != std::string::npos);
  CHECK_FALSE(f.run.has_node("b"));
}

TEST_CASE("a lost node restarts the survivors, who regroup without a last call",
          "[unit][rendezvous]") {
  Fixture f(2, 3);
  f.join("a");
  f.join("b");
  f.join("c");
  Actions lost = f.run.node_lost("b", "connection closed", f.now);
  std::optional<RestartMembers> restart = find<RestartMembers>(lost);
  REQUIRE(restart);
  CHECK(restart->node_ids == std::vector<std::string>{"a", "c"});
  CHECK(restart->reason.find("addr-b lost") != std::string::npos);
  CHECK(find<StartRound>(f.join("c")) == std::nullopt);
  std::optional<StartRound> start = find<StartRound>(f.join("a"));
  REQUIRE(start);
  CHECK(start->round == 1);
  CHECK(member_ids(*start) == std::vector<std::string>{"a", "c"});
  CHECK(start->members[1].base_rank == 2);
  CHECK(f.run.restarts_used() == 0);  // membership changes are not failures
}

TEST_CASE("survivors keep their order: the oldest survivor stays rank 0", "[unit][rendezvous]") {
  Fixture f(1, 3);
  f.join("b");
  f.join("c");
  f.join("d");
  f.run.node_lost("c", "gone", f.now);
  f.join("x");  // a new node during the regroup: after the survivors
  f.join("d");
  std::optional<StartRound> start = find<StartRound>(f.join("b"));
  REQUIRE(start);
  CHECK(member_ids(*start) == std::vector<std::string>{"b", "d", "x"});
}

TEST_CASE("live nodes: heard within the heartbeat timeout, an asker's own prefix not counted",
          "[unit][rendezvous]") {
  Fixture f(3, 4);  // heartbeat timeout 3000 ms
  f.join("host-a:1#0");
  f.join("host-b:2#0");
  f.join("host-b:2#1");
  CHECK(f.run.live_nodes(f.now, "") == 3);
  f.now += 2000ms;
  f.run.heartbeat("host-a:1#0", f.now);
  f.now += 1000ms;  // the two of host-b: 3000 ms ago, still live; host-a 1000 ms
  CHECK(f.run.live_nodes(f.now, "") == 3);
  CHECK(f.run.live_nodes(f.now, "host-b:2#") == 1);
  CHECK(f.run.live_nodes(f.now, "host-a:1#") == 2);
  CHECK(f.run.live_nodes(f.now, "host-a:1#0-and-more") == 3);  // a longer prefix: no id has it
  f.now += 1ms;  // host-b's silent for 3001 ms: not live (not dropped yet: no tick)
  CHECK(f.run.live_nodes(f.now, "") == 1);
  CHECK(f.run.live_nodes(f.now, "host-a:") == 0);
}

TEST_CASE("a silent node is lost after the heartbeat timeout", "[unit][rendezvous]") {
  Fixture f(2, 3);
  f.join("a");
  f.join("b");
  f.join("c");
  f.now += 2000ms;
  f.run.heartbeat("a", f.now);
  f.run.heartbeat("b", f.now);
  CHECK(f.run.tick(f.now).empty());
  f.now += 1001ms;
  f.run.heartbeat("a", f.now);
  f.run.heartbeat("b", f.now);
  Actions actions = f.run.tick(f.now);
  std::optional<DropNode> drop = find<DropNode>(actions);
  REQUIRE(drop);
  CHECK(drop->node_id == "c");
  CHECK(drop->lost);
  std::optional<RestartMembers> restart = find<RestartMembers>(actions);
  REQUIRE(restart);
  CHECK(restart->node_ids == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(f.run.has_node("c"));
}

TEST_CASE("a daemon stopped with its agent (Ctrl-Z) counts every node heard from when it continues",
          "[unit][rendezvous]") {
  Fixture f(2, 3);
  f.join("a");
  f.join("b");
  f.join("c");
  REQUIRE(f.run.phase() == RunState::Phase::Running);
  f.now += 10000ms;  // stopped past the heartbeat timeout (3 s)
  f.run.heard_from_everyone(f.now);
  CHECK(f.run.tick(f.now).empty());
  CHECK(f.run.next_deadline() == f.now + 3000ms);
  f.now += 2000ms;
  f.run.heartbeat("a", f.now);  // c has really gone: lost a heartbeat timeout after the pause
  f.run.heartbeat("b", f.now);
  f.now += 1000ms;
  std::optional<DropNode> drop = find<DropNode>(f.run.tick(f.now));
  REQUIRE(drop);
  CHECK(drop->node_id == "c");
  CHECK(f.run.has_node("a"));
}

TEST_CASE(
    "nodes that go silent one after another are each lost at their own time, in id order "
    "when together",
    "[unit][rendezvous]") {
  Fixture f(1, 5);
  for (const char* id : {"e", "d", "c", "b", "a"}) f.join(id);
  auto dropped = [](const Actions& actions) {
    std::vector<std::string> ids;
    for (const auto& action : actions) {
      if (auto* drop = std::get_if<DropNode>(&action); drop && drop->lost)
        ids.push_back(drop->node_id);
    }
    return ids;
  };
  f.now += 1000ms;  // "e" and "c" fall silent now; the others a second later
  for (const char* id : {"d", "b", "a"}) f.run.heartbeat(id, f.now);
  f.now += 1000ms;
  for (const char* id : {"d", "b"}) f.run.heartbeat(id, f.now);
  f.now += 1001ms;  // 3001 ms since "e" and "c" last spoke, 2001 since "a"
  CHECK(dropped(f.run.tick(f.now)) == std::vector<std::string>{"c", "e"});
  f.now += 1000ms;
  CHECK(dropped(f.run.tick(f.now)) == std::vector<std::string>{"a"});
  CHECK(f.run.has_node("b"));
  CHECK(f.run.has_node("d"));
  f.now += 1000ms;  // 3001 ms since "b" and "d" last spoke
  CHECK(dropped(f.run.tick(f.now)) == std::vector<std::string>{"b", "d"});
}

TEST_CASE("a node lost and back is a new node that scales the run up", "[unit][rendezvous]") {
  Fixture f(2, 3);
  f.join("a");
  f.join("b");
  f.join("c");
  f.run.node_lost("c", "gone", f.now);
  f.join("a");
  REQUIRE(find<StartRound>(f.join("b")));
  Actions back = f.join("c");
  CHECK(find<RestartMembers>(back));  // members + waiting reach max: scale up at once
  CHECK_FALSE(find<StartRound>(f.join("a")));
  std::optional<StartRound> start = find<StartRound>(f.join("b"));
  REQUIRE(start);
  CHECK(member_ids(*start) == std::vector<std::string>{"a", "b", "c"});
  CHECK(start->round == 2);
}

TEST_CASE("joiners below max are coalesced for the last call, then scale up",
          "[unit][rendezvous]") {
  Fixture f(1, 3);
  REQUIRE(find<StartRound>(f.advance(0ms)) == std::nullopt);
  f.join("a");
  REQUIRE(find<StartRound>(f.advance(1000ms)));
  Actions joined = f.join("b");
  CHECK(find<RestartMembers>(joined) == std::nullopt);
  CHECK(f.run.next_deadline() <= f.now + 1000ms);
  Actions actions = f.advance(1000ms);
  std::optional<RestartMembers> restart = find<RestartMembers>(actions);
  REQUIRE(restart);
  CHECK(restart->node_ids == std::vector<std::string>{"a"});
  CHECK(restart->reason.find("scale-up") != std::string::npos);
  CHECK(restart->scale_up);  // no failure: not the run's last failure, no recovery
  std::optional<StartRound> start = find<StartRound>(f.join("a"));
  REQUIRE(start);
  CHECK(member_ids(*start) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("nodes beyond max wait as spares and replace a lost node", "[unit][rendezvous]") {
  Fixture f(2, 2);
  f.join("a");
  f.join("b");
  Actions spare = f.join("s");
  CHECK(find<RestartMembers>(spare) == std::nullopt);
  CHECK(f.advance(5000ms).empty());  // a spare does not disturb a full round
  f.run.node_lost("a", "gone", f.now);
  std::optional<StartRound> start = find<StartRound>(f.join("b"));
  REQUIRE(start);
  CHECK(member_ids(*start) == std::vector<std::string>{"b", "s"});
}

TEST_CASE("a worker failure restarts every node and counts once, after a backoff",
          "[unit][rendezvous]") {
  Fixture f(2, 2, 2);
  f.join("a");
  f.join("b");
  Actions actions = f.run.worker_failed("a", failure(0), f.now);
  std::optional<RestartMembers> restart = find<RestartMembers>(actions);
  REQUIRE(restart);
  CHECK(restart->node_ids.size() == 2);
  CHECK_FALSE(restart->scale_up);
  CHECK(f.run.restarts_used() == 1);
  CHECK(f.run.worker_failed("b", failure(0), f.now).empty());  // the same round: not counted
  CHECK(f.run.restarts_used() == 1);
  f.join("a");
  CHECK(find<StartRound>(f.join("b")) == std::nullopt);  // backoff: 10 ms
  std::optional<StartRound> start = find<StartRound>(f.advance(10ms));
  REQUIRE(start);
  CHECK(start->round == 1);
}

TEST_CASE("with the budget spent every node stops with the root cause", "[unit][rendezvous]") {
  Fixture f(2, 4, 0);
  f.join("a");
  f.join("b");
  f.advance(1000ms);
  REQUIRE(f.run.phase() == RunState::Phase::Running);
  f.join("w");  // waiting for a scale-up: told to stop too
  Actions actions = f.run.worker_failed("b", failure(0, 139), f.now);
  std::optional<StopRun> stop = find<StopRun>(actions);
  REQUIRE(stop);
  CHECK(stop->exit_status == 139);
  CHECK(stop->summary == "SUMMARY");
  CHECK(stop->node_ids == std::vector<std::string>{"a", "b", "w"});
  CHECK(f.run.phase() == RunState::Phase::Failed);
  CHECK(find<DropNode>(f.join("late")));
}

TEST_CASE("a failure the agent made final ends the run with restarts left",
          "[unit][rendezvous][crash-loop]") {
  Fixture f(1, 1, 5);
  f.join("a");
  FailureReport report = failure(0);
  report.final_reason = "a crash loop: the same failure 3 times in a row (exit code 7)";
  std::optional<StopRun> stop = find<StopRun>(f.run.worker_failed("a", report, f.now));
  REQUIRE(stop);
  CHECK(stop->exit_status == 7);
  CHECK(stop->reason.find(": a crash loop: the same failure 3 times") != std::string::npos);
  CHECK(stop->summary == "SUMMARY");
  CHECK(f.run.restarts_used() == 0);
  CHECK(f.run.phase() == RunState::Phase::Failed);
}

TEST_CASE("a failure report from an earlier round is ignored", "[unit][rendezvous]") {
  Fixture f(1, 1, 3);
  f.join("a");
  f.run.worker_failed("a", failure(0), f.now);
  f.join("a");
  f.advance(10ms);
  REQUIRE(f.run.round() == 1);
  CHECK(f.run.worker_failed("a", failure(0), f.now).empty());
  CHECK(f.run.restarts_used() == 1);
}

TEST_CASE("the run completes when every member succeeded", "[unit][rendezvous]") {
  Fixture f(2, 2);
  f.join("a");
  f.join("b");
  CHECK(f.run.node_succeeded("a", 0, f.now).empty());
  std::optional<CompleteRun> complete = find<CompleteRun>(f.run.node_succeeded("b", 0, f.now));
  REQUIRE(complete);
  CHECK(complete->node_ids.size() == 2);
  CHECK(f.run.phase() == RunState::Phase::Completed);
}

TEST_CASE("a restarted daemon continues the round count and the budget", "[unit][rendezvous]") {
  Fixture f(2, 2, 3);
  NodeInfo a = f.node("a");
  a.last_round = 4;
  a.restarts_used = 2;
  NodeInfo b = f.node("b");
  b.last_round = 4;
  f.run.join(a, f.config, f.now);
  std::optional<StartRound> start = find<StartRound>(f.run.join(b, f.config, f.now));
  REQUIRE(start);
  CHECK(start->round == 5);
  CHECK(f.run.restarts_used() == 2);
}

namespace {

// A node rejoining a restarted daemon from `round` (of `nodes` nodes), perhaps with an outcome.
NodeInfo rejoining(Fixture& f, const std::string& id, int round, int nodes,
                   std::optional<CarriedOutcome> outcome = std::nullopt) {
  NodeInfo info = f.node(id);
  info.last_round = round;
  info.last_round_nodes = nodes;
  info.outcome = std::move(outcome);
  return info;
}

}  // namespace

TEST_CASE("a daemon that took a run over says after which round and where that round ran",
          "[unit][rendezvous]") {
  Fixture f(2, 2);
  SECTION("a run that began here was taken over from nowhere") {
    f.run.join(f.node("a"), f.config, f.now);
    REQUIRE(find<StartRound>(f.run.join(f.node("b"), f.config, f.now)));
    CHECK(f.run.resumed_after() == -1);
    CHECK(f.run.moved_from().empty());
  }
  SECTION("a restarted daemon: its nodes name no other endpoint") {
    f.run.join(rejoining(f, "a", 4, 2), f.config, f.now);
    REQUIRE(find<StartRound>(f.run.join(rejoining(f, "b", 4, 2), f.config, f.now)));
    CHECK(f.run.resumed_after() == 4);
    CHECK(f.run.moved_from().empty());
  }
  SECTION("a fallback daemon: the newest round's nodes say where it ran, and it stays said") {
    Fixture g(3, 3);
    NodeInfo old = rejoining(g, "a", 2, 3);
    old.last_round_at = "old-host:29400";
    g.run.join(old, g.config, g.now);
    CHECK(g.run.moved_from() == "old-host:29400");
    NodeInfo newer = rejoining(g, "b", 4, 2);  // a newer round: its endpoint replaces the older
    newer.last_round_at = "gpu-1:29400";
    g.run.join(newer, g.config, g.now);
    CHECK(g.run.resumed_after() == 4);
    CHECK(g.run.moved_from() == "gpu-1:29400");
    NodeInfo same = rejoining(g, "c", 4, 2);
    same.last_round_at = "elsewhere:1";  // the first word about a round is kept
    std::optional<StartRound> start = find<StartRound>(g.run.join(same, g.config, g.now));
    REQUIRE(start);
    CHECK(start->round == 5);
    NodeInfo late = rejoining(g, "d", 6, 2);  // after the first round here, nothing changes
    late.last_round_at = "late:1";
    g.run.join(late, g.config, g.now);
    CHECK(g.run.resumed_after() == 4);
    CHECK(g.run.moved_from() == "gpu-1:29400");
  }
}

TEST_CASE("a restarted daemon completes a run whose nodes all finished while it was down",
          "[unit][rendezvous]") {
  Fixture f(2, 2, 3);
  CarriedOutcome success{4, std::nullopt};
  Actions first = f.run.join(rejoining(f, "a", 4, 2, success), f.config, f.now);
  CHECK(find<StartRound>(first) == std::nullopt);
  std::optional<CompleteRun> complete =
      find<CompleteRun>(f.run.join(rejoining(f, "b", 4, 2, success), f.config, f.now));
  REQUIRE(complete);
  CHECK(complete->node_ids.size() == 2);
  CHECK(f.run.phase() == RunState::Phase::Completed);
}

TEST_CASE("a node still running when the daemon returns means a new round, unless it reports first",
          "[unit][rendezvous]") {
  Fixture f(2, 2, 3);
  f.run.join(rejoining(f, "a", 4, 2, CarriedOutcome{4, std::nullopt}), f.config, f.now);
  std::optional<StartRound> next =
      find<StartRound>(f.run.join(rejoining(f, "b", 4, 2), f.config, f.now));
  REQUIRE(next);  // b's workers still ran: the round cannot complete, a new one starts
  CHECK(next->round == 5);

  Fixture g(2, 2, 3);
  g.run.join(rejoining(g, "b", 4, 2), g.config, g.now);
  CHECK(g.run.node_succeeded("b", 4, g.now).empty());  // its workers ended since its hello
  std::optional<CompleteRun> complete = find<CompleteRun>(
      g.run.join(rejoining(g, "a", 4, 2, CarriedOutcome{4, std::nullopt}), g.config, g.now));
  REQUIRE(complete);
  CHECK(complete->node_ids.size() == 2);
}

TEST_CASE("a failure while the daemon was down counts against the budget", "[unit][rendezvous]") {
  Fixture spent(2, 2, 0);
  CarriedOutcome failed{4, failure(4, 7)};
  spent.run.join(rejoining(spent, "a", 4, 2, failed), spent.config, spent.now);
  std::optional<StopRun> stop =
      find<StopRun>(spent.run.join(rejoining(spent, "b", 4, 2), spent.config, spent.now));
  REQUIRE(stop);
  CHECK(stop->exit_status == 7);
  CHECK(stop->summary == "SUMMARY");
  CHECK(stop->node_ids.size() == 2);

  Fixture budget(2, 2, 3);
  NodeInfo a = rejoining(budget, "a", 4, 2, failed);
  a.restarts_used = 1;
  budget.run.join(a, budget.config, budget.now);
  budget.run.join(rejoining(budget, "b", 4, 2), budget.config, budget.now);
  CHECK(budget.run.restarts_used() == 2);
  std::optional<StartRound> next;
  for (int i = 0; i < 50 && !next; ++i) next = find<StartRound>(budget.advance(100ms));  // backoff
  REQUIRE(next);
  CHECK(next->round == 5);
  CHECK(next->members.size() == 2);
}

TEST_CASE("a node of the old round that never comes back: a new round after the wait",
          "[unit][rendezvous]") {
  Fixture f(1, 2, 3);
  f.run.join(rejoining(f, "a", 4, 2, CarriedOutcome{4, std::nullopt}), f.config, f.now);
  CHECK(f.run.next_deadline() <= f.now + f.config.heartbeat_timeout);
  std::optional<StartRound> next;
  for (int i = 0; i < 60 && !next; ++i) next = find<StartRound>(f.advance(100ms));
  REQUIRE(next);
  CHECK(next->round == 5);
  CHECK(f.run.phase() == RunState::Phase::Running);
}

TEST_CASE("survivors below min wait for a replacement until the join timeout",
          "[unit][rendezvous]") {
  Fixture f(2, 2);
  f.join("a");
  f.join("b");
  f.run.node_lost("b", "gone", f.now);
  CHECK(find<StartRound>(f.join("a")) == std::nullopt);
  Actions replaced = f.join("c");
  std::optional<StartRound> start = find<StartRound>(replaced);
  REQUIRE(start);
  CHECK(member_ids(*start) == std::vector<std::string>{"a", "c"});
  f.run.node_lost("c", "gone", f.now);
  f.join("a");
  Actions timeout = f.advance(10000ms);
  REQUIRE(find<DropNode>(timeout));
  CHECK(f.run.phase() == RunState::Phase::Failed);
}

TEST_CASE("a join reports progress to the joiner, waiting_status covers everyone",
          "[unit][rendezvous]") {
  Fixture f(3, 3);
  f.join("a");
  std::optional<WaitingStatus> joined = find<WaitingStatus>(f.join("b"));
  REQUIRE(joined);
  CHECK(joined->node_ids == std::vector<std::string>{"b"});  // not n^2 messages for n joins
  CHECK(joined->joined == 2);
  std::optional<WaitingStatus> everyone = find<WaitingStatus>(f.run.waiting_status(f.now));
  REQUIRE(everyone);
  CHECK(everyone->node_ids == std::vector<std::string>{"a", "b"});
}

TEST_CASE("a cancelled run stops every node, forming or running, once", "[unit][rendezvous]") {
  Fixture f(2, 3);
  f.join("a");
  f.join("b");
  f.join("c");
  REQUIRE(f.run.phase() == RunState::Phase::Running);
  f.join("d");  // a spare, waiting for the next round
  std::optional<StopRun> stop = find<StopRun>(f.run.cancel(130, "stopped by SIGINT"));
  REQUIRE(stop);
  CHECK(stop->exit_status == 130);
  CHECK(stop->reason == "stopped by SIGINT");
  CHECK(stop->node_ids.size() == 4);
  CHECK(f.run.phase() == RunState::Phase::Failed);
  CHECK(f.run.cancel(4, "again").empty());
  CHECK(find<StopRun>(f.run.worker_failed("a", failure(0), f.now)) == std::nullopt);

  Fixture forming(3, 3);
  forming.join("a");
  REQUIRE(find<StopRun>(forming.run.cancel(4, "host lost")));
  CHECK(forming.run.phase() == RunState::Phase::Failed);
}

// A spare that arrives while the survivors of a failed round are joining again must not fail
// the job (the race of NVIDIA/nvidia-resiliency-ext#348): the survivors keep their places (the
// round waits for the members still stopping their workers, up to the last call), and the spares
// wait for the next loss.
TEST_CASE("a spare joining during a restart does not fail the run, whenever it arrives",
          "[unit][rendezvous][spare]") {
  for (int arrival = 0; arrival < 3; ++arrival) {  // before a's rejoin, between, after b's
    INFO("the spare arrives at step " << arrival);
    Fixture f(2, 2, 3);
    f.join("a");
    f.join("b");
    f.join("s1");  // a spare from the start
    REQUIRE(f.run.phase() == RunState::Phase::Running);
    REQUIRE(find<RestartMembers>(f.run.worker_failed("a", failure(0), f.now)));
    Actions seen;
    auto keep = [&](Actions more) { seen.insert(seen.end(), more.begin(), more.end()); };
    std::vector<std::string> steps{"a", "b"};
    steps.insert(steps.begin() + arrival, "s2");
    for (const std::string& id : steps) {
      keep(f.join(id));
      keep(f.advance(100ms));
    }
    keep(f.advance_until_running());
    CHECK(find<StopRun>(seen) == std::nullopt);
    CHECK(find<DropNode>(seen) == std::nullopt);
    std::optional<StartRound> start = find<StartRound>(seen);
    REQUIRE(start);
    CHECK(start->round == 1);
    CHECK(member_ids(*start) == std::vector<std::string>{"a", "b"});
    CHECK(f.run.phase() == RunState::Phase::Running);
    CHECK(f.run.restarts_used() == 1);
    CHECK(f.run.nodes().size() == 4);  // both spares still wait, for the next loss
  }
}

TEST_CASE("a survivor lost during a restart is replaced by a spare in the same round",
          "[unit][rendezvous][spare]") {
  Fixture f(2, 2, 3);
  f.join("a");
  f.join("b");
  f.join("s");
  REQUIRE(find<RestartMembers>(f.run.worker_failed("a", failure(0), f.now)));
  Actions seen = f.join("a");
  Actions lost = f.run.node_lost("b", "connection closed", f.now);
  seen.insert(seen.end(), lost.begin(), lost.end());
  Actions more = f.advance_until_running();
  seen.insert(seen.end(), more.begin(), more.end());
  CHECK(find<StopRun>(seen) == std::nullopt);
  std::optional<StartRound> start = find<StartRound>(seen);
  REQUIRE(start);
  CHECK(member_ids(*start) == std::vector<std::string>{"a", "s"});
}

TEST_CASE("a member still stopping keeps its place for the last call, not longer",
          "[unit][rendezvous][spare]") {
  Fixture f(2, 2, 3);
  f.join("a");
  f.join("b");
  f.join("s");
  REQUIRE(find<RestartMembers>(f.run.worker_failed("a", failure(0), f.now)));
  CHECK(find<StartRound>(f.join("a")) == std::nullopt);  // s is ready too, but b is stopping
  Actions seen = f.advance_until_running(10);
  std::optional<StartRound> start = find<StartRound>(seen);
  REQUIRE(start);  // b never came back within the last call: the spare takes its place
  CHECK(member_ids(*start) == std::vector<std::string>{"a", "s"});
}

namespace {

RunState::Role role_of(const RunState& run, const std::string& id) {
  for (const auto& view : run.nodes()) {
    if (view.info.node_id == id) return view.role;
  }
  FAIL("no node " << id);
  return RunState::Role::Pending;
}

// Fails b's workers in the current round and brings both members back; the actions seen.
Actions fail_b_and_rejoin(Fixture& f) {
  Actions seen = f.run.worker_failed("b", failure(f.run.round()), f.now);
  for (const char* id : {"a", "b"}) {
    Actions more = f.join(id);
    seen.insert(seen.end(), more.begin(), more.end());
  }
  Actions later = f.advance(200ms);  // past the restart backoff
  seen.insert(seen.end(), later.begin(), later.end());
  return seen;
}

}  // namespace

// torchrun puts a node that comes back too late for the round on the wait list: so does cohort,
// though the node was a member of the round before.
TEST_CASE("a member back from a restart after the round formed without it scales the run up",
          "[unit][rendezvous]") {
  SECTION("at once when it fills the round") {
    Fixture f(1, 2, 3);
    f.join("a");
    REQUIRE(find<StartRound>(f.join("b")));  // round 0: a rank 0, b rank 1
    REQUIRE(find<RestartMembers>(f.run.worker_failed("b", failure(0), f.now)));
    f.join("b");  // a's workers are slow to stop: the last call forms round 1 without it
    std::optional<StartRound> alone = find<StartRound>(f.advance_until_running());
    REQUIRE(alone);
    CHECK(member_ids(*alone) == std::vector<std::string>{"b"});
    std::optional<RestartMembers> restart = find<RestartMembers>(f.join("a"));
    REQUIRE(restart);
    CHECK(restart->scale_up);
    CHECK(restart->node_ids == std::vector<std::string>{"b"});
    std::optional<StartRound> start = find<StartRound>(f.join("b"));
    REQUIRE(start);
    CHECK(start->round == 2);
    // The survivor of round 1 keeps rank 0; a's rank of round 0 is no claim on it.
    CHECK(member_ids(*start) == std::vector<std::string>{"b", "a"});
  }
  SECTION("after the last call when the round has room for more") {
    Fixture f(1, 3, 3);
    f.join("a");
    f.join("b");
    REQUIRE(find<StartRound>(f.advance_until_running()));
    REQUIRE(find<RestartMembers>(f.run.worker_failed("b", failure(0), f.now)));
    f.join("b");
    REQUIRE(find<StartRound>(f.advance_until_running()));
    CHECK(find<RestartMembers>(f.join("a")) == std::nullopt);
    CHECK(role_of(f.run, "a") == RunState::Role::Waiting);
    REQUIRE(f.run.next_deadline() == f.now + 1000ms);
    std::optional<RestartMembers> restart = find<RestartMembers>(f.advance(1000ms));
    REQUIRE(restart);
    CHECK(restart->scale_up);
    std::optional<StartRound> start = find<StartRound>(f.join("b"));
    REQUIRE(start);
    CHECK(member_ids(*start) == std::vector<std::string>{"b", "a"});
  }
}

TEST_CASE("a host that is the root cause twice is excluded and a spare takes its place",
          "[unit][rendezvous][exclusion]") {
  Fixture f(2, 2, 5);
  f.join("a");
  f.join("b");
  f.join("s");
  REQUIRE(f.run.phase() == RunState::Phase::Running);

  Actions first = fail_b_and_rejoin(f);
  CHECK(find<HostExcluded>(first) == std::nullopt);
  std::optional<StartRound> round1 = find<StartRound>(first);
  REQUIRE(round1);
  CHECK(member_ids(*round1) == std::vector<std::string>{"a", "b"});  // b keeps its place

  Actions second = fail_b_and_rejoin(f);
  std::optional<HostExcluded> excluded = find<HostExcluded>(second);
  REQUIRE(excluded);
  CHECK(excluded->host == "addr-b");
  CHECK(excluded->failures == 2);
  CHECK(excluded->cooldown == 60s);
  CHECK(excluded->node_ids.size() == 3);  // every node hears it
  CHECK(excluded->text ==
        "host addr-b is excluded for 60 s: the root cause of 2 failures (--host-failure-limit 2); "
        "a spare takes its place");
  std::optional<StartRound> round2 = find<StartRound>(second);
  REQUIRE(round2);  // the same restart: no wait for b
  CHECK(member_ids(*round2) == std::vector<std::string>{"a", "s"});
  CHECK(role_of(f.run, "b") == RunState::Role::Excluded);
  CHECK(f.run.restarts_used() == 2);

  f.advance(30s);  // heartbeats all along; the cooldown is not over
  CHECK(role_of(f.run, "b") == RunState::Role::Excluded);
  CHECK(find<RestartMembers>(f.advance(30s)) == std::nullopt);  // over: b is a spare now
  CHECK(role_of(f.run, "b") == RunState::Role::Spare);
}

TEST_CASE(
    "a failure every host reports the same way excludes no host, and ends a crash loop as "
    "the job's",
    "[unit][rendezvous][exclusion]") {
  Fixture f(2, 2, 9);
  f.join("a");
  f.join("b");
  f.join("s");
  REQUIRE(f.run.phase() == RunState::Phase::Running);
  FailureReport batch = failure(0);
  batch.cause = "exit code 1: ValueError: 32 is not a multiple of 4";
  for (int round = 0; round < 2; ++round) {  // twice b first, a the same way: no exclusion
    REQUIRE(f.run.round() == round);
    batch.round = round;
    Actions seen = f.run.worker_failed("b", batch, f.now);
    REQUIRE(find<RestartMembers>(seen));
    auto add = [&](Actions more) { seen.insert(seen.end(), more.begin(), more.end()); };
    add(f.run.worker_failed("a", batch, f.now));  // a's report, sent before it rejoins
    add(f.join("a"));
    add(f.join("b"));
    add(f.advance(200ms));  // past the restart backoff
    CHECK(find<HostExcluded>(seen) == std::nullopt);
    std::optional<StartRound> start = find<StartRound>(seen);
    REQUIRE(start);
    CHECK(member_ids(*start) == std::vector<std::string>{"a", "b"});  // the spare waits
  }
  batch.round = 2;
  batch.final_reason = "a crash loop: the same failure 3 times in a row";
  std::optional<StopRun> stop = find<StopRun>(f.run.worker_failed("b", batch, f.now));
  REQUIRE(stop);
  CHECK(stop->reason ==
        "worker rank 1 on addr-a failed with exit code 7: every rank failed the same way: a "
        "configuration or code error, not a node; a crash loop: the same failure 3 times in a row");
  CHECK(stop->summary ==
        "SUMMARY"
        "cohort: every rank failed the same way: a configuration or code error, not a node\n");
}

TEST_CASE("a host the run cannot do without is kept until a spare can take its place",
          "[unit][rendezvous][exclusion]") {
  Fixture f(2, 2, 9);
  f.join("a");
  f.join("b");
  for (int failures = 1; failures <= 2; ++failures) {
    Actions seen = fail_b_and_rejoin(f);
    CHECK(find<HostExcluded>(seen) == std::nullopt);  // only b could take b's place
    std::optional<StartRound> start = find<StartRound>(seen);
    REQUIRE(start);
    CHECK(member_ids(*start) == std::vector<std::string>{"a", "b"});
  }
  f.join("s");
  std::optional<HostExcluded> excluded = find<HostExcluded>(fail_b_and_rejoin(f));
  REQUIRE(excluded);
  CHECK(excluded->failures == 3);
  CHECK(role_of(f.run, "b") == RunState::Role::Excluded);

  Fixture single(1, 1, 9);  // one node: never excluded, never stalled
  single.join("b");
  for (int failures = 0; failures < 3; ++failures) {
    Actions seen = single.run.worker_failed("b", failure(single.run.round()), single.now);
    CHECK(find<HostExcluded>(seen) == std::nullopt);
    single.join("b");
    REQUIRE(find<StartRound>(single.advance(1s)));
  }
}

TEST_CASE("an elastic run goes on without an excluded host and takes it back after the cooldown",
          "[unit][rendezvous][exclusion]") {
  Fixture f(1, 2, 9, 3s);
  f.join("a");
  f.join("b");
  fail_b_and_rejoin(f);
  Actions second = fail_b_and_rejoin(f);
  std::optional<HostExcluded> excluded = find<HostExcluded>(second);
  REQUIRE(excluded);
  CHECK(excluded->text.find("; the run goes on without it") != std::string::npos);
  std::optional<StartRound> without = find<StartRound>(second);
  REQUIRE(without);
  CHECK(member_ids(*without) == std::vector<std::string>{"a"});
  CHECK(find<RestartMembers>(f.advance(2s)) == std::nullopt);
  // The cooldown is over: b is back as a waiting node, and a scale-up takes it in.
  std::optional<RestartMembers> scale_up = find<RestartMembers>(f.advance(1s));
  REQUIRE(scale_up);
  CHECK(scale_up->scale_up);
  CHECK(scale_up->node_ids == std::vector<std::string>{"a"});
  std::optional<StartRound> back = find<StartRound>(f.join("a"));
  REQUIRE(back);
  CHECK(member_ids(*back) == std::vector<std::string>{"a", "b"});

  fail_b_and_rejoin(f);  // twice more: excluded again, for twice as long
  std::optional<HostExcluded> again = find<HostExcluded>(fail_b_and_rejoin(f));
  REQUIRE(again);
  CHECK(again->cooldown == 6s);
}

TEST_CASE("a new node from an excluded host waits out the cooldown, and limit 0 never excludes",
          "[unit][rendezvous][exclusion]") {
  Fixture f(1, 2, 9);
  f.join("a");
  f.join("b");
  fail_b_and_rejoin(f);
  REQUIRE(find<HostExcluded>(fail_b_and_rejoin(f)));
  // b's agent is replaced by a new one on the same host: still excluded.
  f.run.node_lost("b", "connection closed", f.now);
  f.run.join(NodeInfo{"b2", "addr-b", 2, std::nullopt, -1, 0}, f.config, f.now);
  CHECK(role_of(f.run, "b2") == RunState::Role::Excluded);

  Fixture never(2, 2, 9);
  never.config.host_failure_limit = 0;
  RunState run("job", never.config, never.now);
  run.join(never.node("a"), never.config, never.now);
  run.join(never.node("b"), never.config, never.now);
  TimePoint now = never.now;
  for (int round = 0; round < 4; ++round) {
    REQUIRE(run.round() == round);
    CHECK(find<HostExcluded>(run.worker_failed("b", failure(round), now)) == std::nullopt);
    now += 1s;  // past the backoff, within the heartbeat timeout
    run.join(never.node("a"), never.config, now);
    run.join(never.node("b"), never.config, now);
  }
}

TEST_CASE("a hang's collective verdict leads the reason and counts against the culprit's host",
          "[unit][rendezvous][exclusion][hang]") {
  Fixture f(2, 2, 9);
  f.join("a");
  f.join("b");
  f.join("s");
  REQUIRE(f.run.phase() == RunState::Phase::Running);
  HangVerdict verdict;
  verdict.attributed = true;
  verdict.text =
      "all_reduce #120 on default_pg (4 ranks): 3 ranks enqueued it and wait; rank 1 "
      "(addr-a) never did, its last was #119 (all_reduce)";
  verdict.culprit_nodes = {"a"};
  for (int round = 0; round < 2; ++round) {  // b reports the hang, a's rank is the culprit
    Actions seen = f.run.worker_failed("b", failure(f.run.round()), f.now, &verdict);
    if (round == 0) {
      std::optional<RestartMembers> restart = find<RestartMembers>(seen);
      REQUIRE(restart);
      CHECK(restart->reason.find(verdict.text + " (worker rank 1 on addr-a failed") == 0);
    }
    auto add = [&](Actions more) { seen.insert(seen.end(), more.begin(), more.end()); };
    add(f.join("a"));
    add(f.join("b"));
    add(f.advance(200ms));
    if (round == 1) {
      std::optional<HostExcluded> excluded = find<HostExcluded>(seen);
      REQUIRE(excluded);
      CHECK(excluded->host == "addr-a");  // not b's, which declared the hang
    }
  }
  // Stuck in the network: said first, counted against no host.
  HangVerdict stuck;
  stuck.attributed = true;
  stuck.text = "all_reduce #7 on default_pg (4 ranks): every rank started it and none completed";
  Fixture g(2, 2, 0);
  g.join("a");
  g.join("b");
  std::optional<StopRun> stop = find<StopRun>(g.run.worker_failed("b", failure(0), g.now, &stuck));
  REQUIRE(stop);
  CHECK(stop->reason.find(stuck.text) == 0);
  CHECK(stop->summary == "SUMMARYcollective: " + stuck.text + "\n");
}

TEST_CASE("run state lists its first nodes up to a limit in the order of all of them") {
  Fixture f(4, 4);
  for (const char* id : {"d", "b", "a", "c"}) f.join(id);
  std::vector<RunState::NodeView> all = f.run.nodes();
  REQUIRE(all.size() == 4);
  CHECK(f.run.node_count() == 4);
  std::vector<RunState::NodeView> first = f.run.nodes(2);
  REQUIRE(first.size() == 2);
  CHECK(first[0].info.node_id == all[0].info.node_id);
  CHECK(first[1].info.node_id == all[1].info.node_id);
  CHECK(first[1].role == all[1].role);
  CHECK(first[1].group_rank == all[1].group_rank);
  CHECK(f.run.nodes(0).empty());
  CHECK(f.run.nodes(10).size() == 4);
}

TEST_CASE("the waiting refresh period is 500 ms and grows with the run") {
  CHECK(waiting_refresh_interval(0) == 500ms);
  CHECK(waiting_refresh_interval(10000) == 500ms);
  CHECK(waiting_refresh_interval(20000) == 1000ms);
  CHECK(waiting_refresh_interval(100000) == 5000ms);
  // At most about 20,000 refresh messages a second, whatever the count.
  for (size_t waiting : {1000u, 10000u, 50000u, 100000u}) {
    double per_second = static_cast<double>(waiting) * 1000.0 /
                        static_cast<double>(waiting_refresh_interval(waiting).count());
    CHECK(per_second <= 20000.0);
  }
}

// next_deadline() is when the executor's timer ticks the run next: a deadline left at or before a
// tick's time would bring the timer back at once, again and again (a daemon spinning a core).

TEST_CASE("a node is lost at the deadline its heartbeat timeout sets", "[unit][rendezvous]") {
  Fixture f(2, 3);
  f.join("a");
  REQUIRE(f.run.next_deadline() == f.now + 3000ms);
  f.now = *f.run.next_deadline();
  std::optional<DropNode> drop = find<DropNode>(f.run.tick(f.now));
  REQUIRE(drop);
  CHECK(drop->node_id == "a");
  CHECK(f.run.next_deadline() > f.now);
}

TEST_CASE("the join timeout is no deadline once enough nodes wait for the last call",
          "[unit][rendezvous]") {
  Fixture f(1, 3);
  TimePoint join_timeout = f.now + 10000ms;
  f.now += 9500ms;
  f.join("a");  // enough for a round: it closes after the last call, past the join timeout
  CHECK(f.run.next_deadline() == f.now + 1000ms);
  f.advance(500ms);
  REQUIRE(f.now == join_timeout);
  CHECK(f.run.phase() == RunState::Phase::Forming);
  CHECK(f.run.next_deadline() > f.now);
  CHECK(find<StartRound>(f.advance(500ms)));
}

TEST_CASE("a restart's backoff is the next deadline once the last call has passed",
          "[unit][rendezvous]") {
  TimePoint now = TimePoint(std::chrono::hours(1));
  RunConfig config{1, 2, 3, 5ms, 10000ms, 3000ms};  // a last call shorter than the 10 ms backoff
  RunState run("job", config, now);
  run.join(NodeInfo{"a", "addr-a", 1}, config, now);
  REQUIRE(find<StartRound>(run.join(NodeInfo{"b", "addr-b", 1}, config, now)));
  REQUIRE(find<RestartMembers>(run.worker_failed("a", failure(0), now)));
  run.join(NodeInfo{"a", "addr-a", 1}, config, now);  // b is still stopping its workers
  CHECK(run.tick(now + 5ms).empty());                 // the last call is over, the backoff is not
  CHECK(run.next_deadline() == now + 10ms);           // the backoff's end, not the last call's
  std::optional<StartRound> start = find<StartRound>(run.tick(now + 10ms));
  REQUIRE(start);
  CHECK(member_ids(*start) == std::vector<std::string>{"a"});
}

TEST_CASE("a carried round's ruling is the next deadline once the last call has passed",
          "[unit][rendezvous]") {
  Fixture f(1, 3);
  TimePoint start = f.now;
  f.join("x");  // a new node: the last call is set for it
  CarriedOutcome success{4, std::nullopt};
  f.run.join(rejoining(f, "a", 4, 3, success), f.config, f.now);  // waits for its round's others
  f.advance(1000ms);
  CHECK(f.run.phase() == RunState::Phase::Forming);
  CHECK(f.run.next_deadline() == start + 3000ms);
  CHECK(find<StartRound>(f.advance(2000ms)));
}

TEST_CASE("with a quorum, survivors of a round form the next one only as a majority",
          "[unit][rendezvous][quorum]") {
  Fixture f(1, 4);
  f.config.fallbacks = "b:29400";
  RunState run("job", f.config, f.now);
  auto join = [&](const std::string& id) { return run.join(f.node(id), f.config, f.now); };
  for (const char* id : {"a", "b", "c", "d"}) join(id);
  REQUIRE(run.phase() == RunState::Phase::Running);  // the first round: --nnodes' minimum only
  // Two of four lost at once (a partition, or a daemon on the other side of it): no majority.
  run.node_lost("c", "gone", f.now);
  run.node_lost("d", "gone", f.now);
  std::optional<WaitingStatus> waiting = find<WaitingStatus>(join("a"));
  REQUIRE(waiting);
  CHECK(waiting->min_nodes == 3);
  join("b");
  for (int i = 0; i < 25; ++i) {  // 5 s, well past the last call
    f.now += 200ms;
    for (const char* id : {"a", "b"}) run.heartbeat(id, f.now);
    CHECK(find<StartRound>(run.tick(f.now)) == std::nullopt);
  }
  CHECK(run.phase() == RunState::Phase::Forming);
  // A new node cannot make them whole: it was no member of the last round (a cut-off minority
  // could otherwise grow into a second run).
  join("e");
  for (int i = 0; i < 10; ++i) {
    f.now += 200ms;
    for (const char* id : {"a", "b", "e"}) run.heartbeat(id, f.now);
    CHECK(find<StartRound>(run.tick(f.now)) == std::nullopt);
  }
  // A lost member coming back (its hello carries round 0) does: three of the last four.
  std::optional<StartRound> start =
      find<StartRound>(run.join(rejoining(f, "c", 0, 4), f.config, f.now));
  REQUIRE(start);  // four pending: full
  CHECK(member_ids(*start) == std::vector<std::string>{"a", "b", "c", "e"});
  // Now one of four may go: three of four is a majority.
  run.node_lost("e", "gone", f.now);
  join("a");
  join("b");
  CHECK(find<StartRound>(run.join(rejoining(f, "c", 1, 4), f.config, f.now)).has_value());
}

// c's workers were slow to stop, so round 1 formed without it; a and b, a majority of round 1,
// then leave for a fallback daemon. c, a member of round 0 only, must not make x a second one.
TEST_CASE("with a quorum, a node that sat the last round out does not count toward it",
          "[unit][rendezvous][quorum]") {
  Fixture f(1, 4, 3);
  f.config.fallbacks = "b:29400";
  RunState run("job", f.config, f.now);
  auto join = [&](const std::string& id) { return run.join(f.node(id), f.config, f.now); };
  auto tick = [&](std::initializer_list<const char*> ids) {
    f.now += 200ms;
    for (const char* id : ids) run.heartbeat(id, f.now);
    return run.tick(f.now);
  };
  for (const char* id : {"a", "b", "c", "x"}) join(id);
  REQUIRE(run.phase() == RunState::Phase::Running);
  REQUIRE(find<RestartMembers>(run.worker_failed("x", failure(0), f.now)));
  for (const char* id : {"a", "b", "x"}) join(id);
  std::optional<StartRound> round1;
  for (int i = 0; i < 10 && !round1; ++i) round1 = find<StartRound>(tick({"a", "b", "c", "x"}));
  REQUIRE(round1);
  REQUIRE(member_ids(*round1) == std::vector<std::string>{"a", "b", "x"});
  join("c");  // back late: a scale-up restarts round 1's members
  run.node_lost("a", "left for the fallback", f.now);
  run.node_lost("b", "left for the fallback", f.now);
  Actions seen = join("x");
  for (int i = 0; i < 60 && run.phase() == RunState::Phase::Forming; ++i) {
    Actions more = tick({"c", "x"});
    seen.insert(seen.end(), more.begin(), more.end());
  }
  CHECK(find<StartRound>(seen) == std::nullopt);
  std::optional<DropNode> drop = find<DropNode>(seen);
  REQUIRE(drop);
  CHECK(drop->reason.find("the last round's 3 nodes back, 1 came") != std::string::npos);
}

TEST_CASE("with a quorum, a minority times out naming the last round",
          "[unit][rendezvous][quorum]") {
  Fixture f(1, 3);
  f.config.fallbacks = "b:29400";
  RunState run("job", f.config, f.now);
  for (const char* id : {"a", "b", "c"}) run.join(f.node(id), f.config, f.now);
  REQUIRE(run.phase() == RunState::Phase::Running);
  run.node_lost("b", "gone", f.now);
  run.node_lost("c", "gone", f.now);
  run.join(f.node("a"), f.config, f.now);
  Actions timeout;
  for (int i = 0; i < 60 && timeout.empty(); ++i) {
    f.now += 200ms;
    run.heartbeat("a", f.now);
    timeout = run.tick(f.now);
  }
  std::optional<DropNode> drop = find<DropNode>(timeout);
  REQUIRE(drop);
  CHECK(drop->reason.find("1 of at least 2 nodes") != std::string::npos);
  CHECK(drop->reason.find("more than half of the last round's 3 nodes") != std::string::npos);
  CHECK(run.phase() == RunState::Phase::Failed);
}

TEST_CASE("a fallback daemon takes the quorum from the round its nodes carry",
          "[unit][rendezvous][quorum]") {
  Fixture f(1, 3);
  f.config.fallbacks = "b:29400";
  SECTION("one node of a round of three is no majority") {
    RunState run("job", f.config, f.now);
    run.join(rejoining(f, "a", 2, 3), f.config, f.now);
    for (int i = 0; i < 25; ++i) {
      f.now += 200ms;
      run.heartbeat("a", f.now);
      CHECK(find<StartRound>(run.tick(f.now)) == std::nullopt);
    }
  }
  SECTION("two are, and the round count goes on") {
    RunState run("job", f.config, f.now);
    run.join(rejoining(f, "a", 2, 3), f.config, f.now);
    run.join(rejoining(f, "b", 2, 3), f.config, f.now);
    std::optional<StartRound> start;
    for (int i = 0; i < 10 && !start; ++i) {
      f.now += 200ms;
      for (const char* id : {"a", "b"}) run.heartbeat(id, f.now);
      start = find<StartRound>(run.tick(f.now));
    }
    REQUIRE(start);
    CHECK(start->round == 3);
    CHECK(start->members.size() == 2);
  }
  SECTION("without a quorum, one node forms a round as before") {
    f.config.fallbacks.clear();
    RunState run("job", f.config, f.now);
    run.join(rejoining(f, "a", 2, 3), f.config, f.now);
    std::optional<StartRound> start;
    for (int i = 0; i < 10 && !start; ++i) {
      f.now += 200ms;
      run.heartbeat("a", f.now);
      start = find<StartRound>(run.tick(f.now));
    }
    CHECK(start.has_value());
  }
}

TEST_CASE("a fresh daemon counts only the newest round's members toward its quorum",
          "[unit][rendezvous][quorum]") {
  // Round 5 had a, b, c; d, a spare since round 4, carries that older round. a and c train on
  // at the first daemon, cut off from b and d: b and d must not make a second majority.
  Fixture f(1, 3);
  f.config.fallbacks = "b:29400";
  auto stays_forming = [&](RunState& run, std::vector<const char*> ids) {
    for (int i = 0; i < 25; ++i) {
      f.now += 200ms;
      for (const char* id : ids) run.heartbeat(id, f.now);
      if (find<StartRound>(run.tick(f.now))) return false;
    }
    return true;
  };
  SECTION("the older round's node first") {
    RunState run("job", f.config, f.now);
    run.join(rejoining(f, "d", 4, 3), f.config, f.now);
    run.join(rejoining(f, "b", 5, 3), f.config, f.now);
    CHECK(stays_forming(run, {"b", "d"}));
  }
  SECTION("the newer round's node first") {
    RunState run("job", f.config, f.now);
    run.join(rejoining(f, "b", 5, 3), f.config, f.now);
    run.join(rejoining(f, "d", 4, 3), f.config, f.now);
    CHECK(stays_forming(run, {"b", "d"}));
    // Another member of round 5 makes the majority; d fills the round beside it.
    std::optional<StartRound> start =
        find<StartRound>(run.join(rejoining(f, "c", 5, 3), f.config, f.now));  // 3: max
    for (int i = 0; i < 10 && !start; ++i) {
      f.now += 200ms;
      for (const char* id : {"b", "c", "d"}) run.heartbeat(id, f.now);
      start = find<StartRound>(run.tick(f.now));
    }
    REQUIRE(start);
    CHECK(start->round == 6);
    CHECK(start->members.size() == 3);
  }
}

TEST_CASE("a fresh daemon forms at once when the last round is back but its lost host",
          "[unit][rendezvous][quorum]") {
  Fixture f(1, 3);  // last call 1 s
  f.config.fallbacks = "b:29400";
  auto host_lost = [&](const std::string& id, int round = 2) {
    NodeInfo info = rejoining(f, id, round, 3);
    info.last_round_host_lost = true;
    return info;
  };
  SECTION("two of a round of three whose host is gone: no last call") {
    RunState run("job", f.config, f.now);
    CHECK_FALSE(find<StartRound>(run.join(host_lost("a"), f.config, f.now)));
    std::optional<StartRound> start = find<StartRound>(run.join(host_lost("b"), f.config, f.now));
    REQUIRE(start);
    CHECK(start->round == 3);
    CHECK(start->members.size() == 2);
  }
  SECTION("one node saying so is enough; a new node does not stand in for a member") {
    RunState run("job", f.config, f.now);
    run.join(host_lost("a"), f.config, f.now);
    CHECK_FALSE(find<StartRound>(run.join(f.node("new"), f.config, f.now)));
    CHECK(find<StartRound>(run.join(rejoining(f, "b", 2, 3), f.config, f.now)));
  }
  SECTION("a restarted daemon with every member back forms at once") {
    RunState run("job", f.config, f.now);
    run.join(rejoining(f, "a", 2, 3), f.config, f.now);
    CHECK_FALSE(find<StartRound>(run.join(rejoining(f, "b", 2, 3), f.config, f.now)));
    CHECK(find<StartRound>(run.join(rejoining(f, "c", 2, 3), f.config, f.now)));
  }
  SECTION("without the host's loss, two of three wait for the last call") {
    RunState run("job", f.config, f.now);
    run.join(rejoining(f, "a", 2, 3), f.config, f.now);
    CHECK_FALSE(find<StartRound>(run.join(rejoining(f, "b", 2, 3), f.config, f.now)));
    f.now += 900ms;
    for (const char* id : {"a", "b"}) run.heartbeat(id, f.now);
    CHECK_FALSE(find<StartRound>(run.tick(f.now)));
    f.now += 200ms;
    for (const char* id : {"a", "b"}) run.heartbeat(id, f.now);
    CHECK(find<StartRound>(run.tick(f.now)));
  }
  SECTION("after its first round the daemon waits for the last call again") {
    RunState run("job", f.config, f.now);
    run.join(host_lost("a"), f.config, f.now);
    REQUIRE(find<StartRound>(run.join(host_lost("b"), f.config, f.now)));
    // A third node scales the run up after the last call, as in any running round.
    CHECK_FALSE(find<StartRound>(run.join(host_lost("c", 3), f.config, f.now)));
  }
}

TEST_CASE("the fallbacks are part of the run's settings", "[unit][rendezvous][quorum]") {
  RunConfig mine;
  RunConfig run = mine;
  run.fallbacks = "b:29400,c:29400";
  CHECK(describe_config_difference(mine, run) ==
        "--rdzv-fallback none differs from the run's b:29400,c:29400");
  mine.fallbacks = "c:29400,b:29400";  // the order is where the run goes first
  CHECK(describe_config_difference(mine, run) ==
        "--rdzv-fallback c:29400,b:29400 differs from the run's b:29400,c:29400");
}

namespace {

// The ids of the nodes the actions drop, in order.
std::vector<std::string> dropped_ids(const Actions& actions) {
  std::vector<std::string> ids;
  for (const auto& action : actions) {
    if (auto* drop = std::get_if<DropNode>(&action)) ids.push_back(drop->node_id);
  }
  return ids;
}

}  // namespace

TEST_CASE("a member parked unhealthy restarts the others and scales the run up once it joins",
          "[unit][rendezvous][health]") {
  Fixture f(1, 2);
  f.join("a");
  REQUIRE(find<StartRound>(f.join("x")));
  Actions parked = f.run.park_unhealthy(f.node("x"), f.config, "GPU 0 lost", f.now);
  std::optional<RestartMembers> restart = find<RestartMembers>(parked);
  REQUIRE(restart);
  CHECK(restart->node_ids == std::vector<std::string>{"a"});
  CHECK(restart->reason == "node addr-x lost: unhealthy: GPU 0 lost");
  CHECK(role_of(f.run, "x") == RunState::Role::Unhealthy);
  CHECK(f.run.park_unhealthy(f.node("x"), f.config, "GPU 0 lost", f.now).empty());  // again
  std::optional<StartRound> alone = find<StartRound>(f.join("a"));  // the only one stopping
  REQUIRE(alone);
  CHECK(member_ids(*alone) == std::vector<std::string>{"a"});
  CHECK(f.run.live_nodes(f.now, "") == 1);   // an unhealthy node is no reason to follow the run
  CHECK(find<RestartMembers>(f.join("x")));  // healthy again: members + waiting reach max
  std::optional<StartRound> start = find<StartRound>(f.join("a"));
  REQUIRE(start);
  CHECK(member_ids(*start) == std::vector<std::string>{"a", "x"});
}

TEST_CASE("with a quorum, a member parked unhealthy counts toward it again when it joins",
          "[unit][rendezvous][quorum][health]") {
  SECTION("parked while the others regroup") {
    Fixture f(1, 2, 3);
    f.config.fallbacks = "b:29400";
    RunState run("job", f.config, f.now);
    auto join = [&](const std::string& id) { return run.join(f.node(id), f.config, f.now); };
    join("a");
    REQUIRE(find<StartRound>(join("x")));
    REQUIRE(find<RestartMembers>(run.worker_failed("a", failure(0), f.now)));
    join("a");
    run.park_unhealthy(f.node("x"), f.config, "GPU 0 lost", f.now);
    f.now += 200ms;  // past the restart's backoff
    run.heartbeat("a", f.now);
    CHECK(find<StartRound>(run.tick(f.now)) == std::nullopt);       // one of two: no majority
    std::optional<StartRound> start = find<StartRound>(join("x"));  // two of two
    REQUIRE(start);
    CHECK(member_ids(*start) == std::vector<std::string>{"a", "x"});
  }
  SECTION("not for a round that formed while it was parked") {
    Fixture f(1, 3, 3);
    f.config.fallbacks = "b:29400";
    RunState run("job", f.config, f.now);
    auto join = [&](const std::string& id) { return run.join(f.node(id), f.config, f.now); };
    for (const char* id : {"a", "b", "x"}) join(id);
    REQUIRE(find<RestartMembers>(run.worker_failed("a", failure(0), f.now)));
    join("a");
    join("b");
    run.park_unhealthy(f.node("x"), f.config, "GPU 0 lost", f.now);
    f.now += 200ms;
    for (const char* id : {"a", "b", "x"}) run.heartbeat(id, f.now);
    REQUIRE(find<StartRound>(run.tick(f.now)));  // round 1: a and b
    REQUIRE(find<RestartMembers>(join("x")));    // scale-up
    run.node_lost("a", "left for the fallback", f.now);
    Actions seen = join("b");
    for (int i = 0; i < 60 && run.phase() == RunState::Phase::Forming; ++i) {
      f.now += 200ms;
      for (const char* id : {"b", "x"}) run.heartbeat(id, f.now);
      Actions more = run.tick(f.now);
      seen.insert(seen.end(), more.begin(), more.end());
    }
    CHECK(find<StartRound>(seen) == std::nullopt);  // x was no member of round 1
    std::optional<DropNode> drop = find<DropNode>(seen);
    REQUIRE(drop);
    CHECK(drop->reason.find("the last round's 2 nodes back, 1 came") != std::string::npos);
  }
}

TEST_CASE("an unhealthy node hears how the run ends, and is lost when it falls silent",
          "[unit][rendezvous][health]") {
  SECTION("the join timeout drops it with the others") {
    Fixture f(2, 2);
    f.join("a");
    CHECK(f.run.park_unhealthy(f.node("b"), f.config, "GPU 0 lost", f.now).empty());
    Actions timeout = f.advance(10000ms);
    CHECK(dropped_ids(timeout) == std::vector<std::string>{"a", "b"});
    std::optional<DropNode> drop = find<DropNode>(timeout);
    REQUIRE(drop);
    CHECK(drop->reason ==
          "rendezvous timed out: 1 of at least 2 nodes joined within the join timeout (10 s); 1 "
          "more node failed its health check");
    CHECK(f.run.empty());
  }
  SECTION("a stop names it") {
    Fixture f(1, 2);
    f.join("a");
    f.run.park_unhealthy(f.node("b"), f.config, "GPU 0 lost", f.now);
    REQUIRE(find<StartRound>(f.advance_until_running()));
    std::optional<StopRun> stop = find<StopRun>(f.run.worker_failed("a", failure(0), f.now));
    REQUIRE(stop);
    CHECK(stop->node_ids == std::vector<std::string>{"a", "b"});
  }
  SECTION("a completion names it") {
    Fixture f(1, 2);
    f.join("a");
    f.run.park_unhealthy(f.node("b"), f.config, "GPU 0 lost", f.now);
    REQUIRE(find<StartRound>(f.advance_until_running()));
    std::optional<CompleteRun> complete = find<CompleteRun>(f.run.node_succeeded("a", 0, f.now));
    REQUIRE(complete);
    CHECK(complete->node_ids == std::vector<std::string>{"a", "b"});
  }
  SECTION("silent past the heartbeat timeout, it is lost") {
    Fixture f(2, 2);
    f.join("a");
    f.run.park_unhealthy(f.node("b"), f.config, "GPU 0 lost", f.now);
    f.now += 3000ms;
    f.run.heartbeat("a", f.now);
    Actions actions = f.run.tick(f.now);
    CHECK(dropped_ids(actions) == std::vector<std::string>{"b"});
    std::optional<DropNode> drop = find<DropNode>(actions);
    REQUIRE(drop);
    CHECK(drop->lost);
    CHECK_FALSE(f.run.has_node("b"));
  }
  SECTION("an ended run refuses it as it refuses a join") {
    Fixture f(1, 1);
    REQUIRE(find<StartRound>(f.join("a")));
    REQUIRE(find<CompleteRun>(f.run.node_succeeded("a", 0, f.now)));
    std::optional<DropNode> drop =
        find<DropNode>(f.run.park_unhealthy(f.node("b"), f.config, "GPU 0 lost", f.now));
    REQUIRE(drop);
    CHECK(drop->reason == "run 'job' has already finished");
    CHECK_FALSE(f.run.has_node("b"));
  }
}
