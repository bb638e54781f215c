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

  explicit Fixture(int min_nodes, int max_nodes, int max_restarts = 0)
      : config{min_nodes, max_nodes, max_restarts, 1000ms, 10000ms, 3000ms},
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
  REQUIRE(actions.size() == 2);
  std::optional<DropNode> drop = find<DropNode>(actions);
  REQUIRE(drop);
  CHECK(drop->reason.find("2 of at least 3 nodes") != std::string::npos);
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
