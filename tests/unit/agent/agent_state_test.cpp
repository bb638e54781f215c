// The agent's state machine, event by event: rounds, restarts, outcomes, the daemon's verdicts,
// losses of the connection, signals and the end of stdin. No process, socket or timer.
#include <catch2/catch.hpp>
#include <csignal>

#include "agent/agent_state.hpp"
#include "common/exit_codes.hpp"

using namespace cohort;
using namespace cohort::agent;
using namespace std::chrono_literals;
using Phase = AgentState::Phase;

namespace {

const TimePoint kNoon = TimePoint(std::chrono::hours(12));

std::string name_of(const Action& action) {
  return std::visit(
      [](const auto& typed) -> std::string {
        using T = std::decay_t<decltype(typed)>;
        if constexpr (std::is_same_v<T, Connect>) return "Connect";
        if constexpr (std::is_same_v<T, ReconnectAfter>) return "ReconnectAfter";
        if constexpr (std::is_same_v<T, SendJoin>) return "SendJoin";
        if constexpr (std::is_same_v<T, ReportSuccess>) return "ReportSuccess";
        if constexpr (std::is_same_v<T, ReportFailure>) return "ReportFailure";
        if constexpr (std::is_same_v<T, Leave>) return "Leave";
        if constexpr (std::is_same_v<T, Disconnect>) return "Disconnect";
        if constexpr (std::is_same_v<T, StartGroup>) return "StartGroup";
        if constexpr (std::is_same_v<T, StopGroup>) return "StopGroup";
        if constexpr (std::is_same_v<T, KillGroup>) return "KillGroup";
        if constexpr (std::is_same_v<T, ForwardSignal>) return "ForwardSignal";
        if constexpr (std::is_same_v<T, Say>) return "Say";
        if constexpr (std::is_same_v<T, ShowProgress>) return "ShowProgress";
        if constexpr (std::is_same_v<T, PrintSummary>) return "PrintSummary";
        if constexpr (std::is_same_v<T, Exit>) return "Exit";
      },
      action);
}

// The actions' kinds, in order: what the tests compare.
std::vector<std::string> names(const Actions& actions) {
  std::vector<std::string> result;
  for (const auto& action : actions) result.push_back(name_of(action));
  return result;
}

using Names = std::vector<std::string>;

// A copy of the first action of type T.
template <typename T>
std::optional<T> find(const Actions& actions) {
  for (const auto& action : actions) {
    if (auto* found = std::get_if<T>(&action)) return *found;
  }
  return std::nullopt;
}

std::optional<int> exit_code(const Actions& actions) {
  if (auto exit = find<Exit>(actions)) return exit->code;
  return std::nullopt;
}

std::vector<std::string> said(const Actions& actions) {
  std::vector<std::string> lines;
  for (const auto& action : actions) {
    if (auto* say = std::get_if<Say>(&action)) lines.push_back(say->text);
  }
  return lines;
}

proto::RoundAssigned round_number(int round, int restarts_used = 0, int max_restarts = 10) {
  proto::RoundAssigned assigned;
  assigned.round = round;
  assigned.group_rank = 1;
  assigned.group_world_size = 2;
  assigned.base_rank = 2;
  assigned.world_size = 4;
  assigned.master_addr = "node0";
  assigned.master_port = 29500;
  assigned.restarts_used = restarts_used;
  assigned.max_restarts = max_restarts;
  return assigned;
}

std::vector<WorkerFailure> failures_of(int rank, ExitStatus status) {
  WorkerFailure failure;
  failure.rank = rank;
  failure.local_rank = rank - 2;
  failure.status = status;
  return {failure};
}

Settings settings(bool under_launch, std::string run_id = "job") {
  return Settings{"train.py", "hostA", std::move(run_id), under_launch, 30000ms, {SIGUSR2}};
}

// An agent that has connected and waits for its first round.
struct Fixture {
  AgentState state;

  explicit Fixture(bool under_launch = false) : state(settings(under_launch)) { state.start(); }
  // Joined and running the workers of `round`.
  void run_round(int round = 0) {
    state.round_assigned(round_number(round));
    REQUIRE(state.phase() == Phase::Running);
  }
  // The workers failed and the failure is reported; returns the summary sent.
  std::string fail_and_report() {
    run_round();
    auto report = find<ReportFailure>(state.group_failed(failures_of(3, ExitStatus::exited(7))));
    REQUIRE(report);
    return report->report.summary;
  }
};

proto::Stop stop_with(int status, std::string summary, std::string reason = "rank 3 failed") {
  return proto::Stop{status, std::move(reason), std::move(summary)};
}

}  // namespace

TEST_CASE("agent: starts by connecting and waits for a round", "[unit][agent]") {
  AgentState state(Settings{});
  CHECK(names(state.start()) == Names{"Connect"});
  CHECK(state.phase() == Phase::Joining);
  CHECK(state.round() == -1);
}

TEST_CASE("agent: a round starts the workers and is remembered for the hello", "[unit][agent]") {
  Fixture f;
  Actions actions = f.state.round_assigned(round_number(4, 2));
  CHECK(names(actions) == Names{"Say", "StartGroup"});
  CHECK(said(actions)[0] == "joined round=4 group_rank=1 of 2 world_size=4 master=node0:29500");
  CHECK(find<StartGroup>(actions)->round.round == 4);
  CHECK(f.state.phase() == Phase::Running);
  CHECK(f.state.round() == 4);
  CHECK(f.state.restarts_used() == 2);
}

TEST_CASE("agent: success is reported, and complete exits 0", "[unit][agent]") {
  Fixture f;
  f.run_round(3);
  Actions done = f.state.group_succeeded();
  CHECK(names(done) == Names{"Say", "ReportSuccess"});
  CHECK(find<ReportSuccess>(done)->round == 3);
  CHECK(f.state.phase() == Phase::Reported);

  Actions complete = f.state.complete();
  CHECK(names(complete) == Names{"Say", "Exit"});
  CHECK(exit_code(complete) == kExitSuccess);
  CHECK(f.state.phase() == Phase::Finished);
}

TEST_CASE("agent: a node that waited while its run completed says it ran nothing",
          "[unit][agent]") {
  AgentState state(settings(false));
  state.start();
  Actions complete = state.complete();
  CHECK(names(complete) == Names{"Say", "Exit"});
  CHECK(find<Say>(complete)->level == log::Level::Warn);
  CHECK(said(complete)[0] ==
        "run 'job' completed while this node waited to join it: this node ran nothing");
  CHECK(exit_code(complete) == kExitSuccess);  // as torchrun's spares: nothing failed

  AgentState unnamed(settings(false, "none"));
  unnamed.start();
  CHECK(said(unnamed.complete())[0] ==
        "run 'none' completed while this node waited to join it: this node ran nothing (every "
        "job that leaves out --rdzv-id joins run 'none' on its rendezvous: give each job its own "
        "id)");

  AgentState launched(settings(true));
  launched.start();
  CHECK(find<Say>(launched.complete())->level == log::Level::Info);
}

TEST_CASE("agent: a failure is reported with the root cause and its summary", "[unit][agent]") {
  Fixture f;
  f.run_round(2);
  Actions actions = f.state.group_failed(failures_of(3, ExitStatus::killed_by(SIGSEGV)));
  CHECK(names(actions) == Names{"Say", "ReportFailure"});
  CHECK(said(actions)[0] == "worker rank=3 failed with signal 11 (SIGSEGV)");
  proto::WorkerFailed report = find<ReportFailure>(actions)->report;
  CHECK(report.round == 2);
  CHECK(report.rank == 3);
  CHECK(report.local_rank == 1);
  CHECK(report.exit_status == 128 + SIGSEGV);
  CHECK(report.host == "hostA");
  CHECK(report.summary.find("train.py") != std::string::npos);
  CHECK(report.cause == "signal 11 (SIGSEGV)");  // for the daemon to tell it from other hosts'
  CHECK(find<ReportFailure>(actions)->root_cause.rank == 3);
  CHECK(f.state.phase() == Phase::Reported);
}

TEST_CASE("agent: the reported outcome rides in every hello until the daemon answers",
          "[unit][agent]") {
  Fixture f;
  CHECK(f.state.round_nodes() == 0);
  f.run_round(3);
  CHECK(f.state.round_nodes() == 2);
  CHECK_FALSE(f.state.unanswered_outcome());  // workers running: nothing to carry
  f.state.group_succeeded();
  f.state.connection_lost(ConnectionLoss::Closed, "the daemon died");
  std::optional<proto::CarriedOutcome> success = f.state.unanswered_outcome();
  REQUIRE(success);
  CHECK(success->round == 3);
  CHECK_FALSE(success->failure);
  f.state.complete();
  CHECK_FALSE(f.state.unanswered_outcome());

  Fixture g;
  g.run_round(5);
  g.state.group_failed(failures_of(3, ExitStatus::exited(7)));
  std::optional<proto::CarriedOutcome> failure = g.state.unanswered_outcome();
  REQUIRE(failure);
  REQUIRE(failure->failure);
  CHECK(failure->failure->exit_status == 7);
  CHECK(failure->failure->round == 5);
  g.state.restart("worker failed");  // the daemon's answer
  CHECK_FALSE(g.state.unanswered_outcome());
}

TEST_CASE("agent: with the budget spent, stop prints the summary and exits with its status",
          "[unit][agent]") {
  Fixture f;
  std::string summary = f.fail_and_report();
  Actions actions = f.state.stop(stop_with(7, summary));
  CHECK(names(actions) == Names{"PrintSummary", "Exit"});
  CHECK(find<PrintSummary>(actions)->summary == summary);
  CHECK(exit_code(actions) == 7);
}

TEST_CASE("agent: under cohort launch only the root cause's host prints the summary",
          "[unit][agent]") {
  SECTION("its own failure") {
    Fixture f(true);
    std::string summary = f.fail_and_report();
    CHECK(names(f.state.stop(stop_with(7, summary))) == Names{"PrintSummary", "Exit"});
  }
  SECTION("another host's failure: one info line") {
    Fixture f(true);
    Actions actions = f.state.stop(stop_with(7, "ANOTHER HOST'S SUMMARY"));
    CHECK(names(actions) == Names{"Say", "Exit"});
    CHECK(std::get<Say>(actions[0]).level == log::Level::Info);
    CHECK(said(actions)[0] == "the run failed: rank 3 failed");
  }
  SECTION("another host's failure, not under launch: the summary") {
    Fixture f(false);
    CHECK(names(f.state.stop(stop_with(7, "ANOTHER HOST'S SUMMARY"))) ==
          Names{"PrintSummary", "Exit"});
  }
  SECTION("no summary, not under launch: an error line") {
    Fixture f(false);
    Actions actions = f.state.stop(stop_with(130, "", "cancelled by cohort launch"));
    CHECK(std::get<Say>(actions[0]).level == log::Level::Error);
    CHECK(exit_code(actions) == 130);
  }
}

TEST_CASE("agent: a run stopped by cohort stop says who stopped it, not that it failed",
          "[unit][agent]") {
  Fixture f(false);
  proto::Stop stop{130, "maintenance", "", "alice@login1"};
  Actions actions = f.state.stop(stop);
  CHECK(names(actions) == Names{"Say", "Exit"});
  CHECK(std::get<Say>(actions[0]).level == log::Level::Warn);
  CHECK(said(actions)[0] == "the run was stopped by alice@login1: maintenance");
  CHECK(exit_code(actions) == 130);
}

TEST_CASE("agent: stop while the workers run stops them first, then reports", "[unit][agent]") {
  Fixture f;
  f.run_round();
  Actions stop = f.state.stop(stop_with(7, "SUMMARY"));
  CHECK(names(stop) == Names{"StopGroup"});
  CHECK(find<StopGroup>(stop)->signal == SIGTERM);
  CHECK(f.state.phase() == Phase::Ending);
  // The workers die of the SIGTERM: that is no failure of this node's to report.
  Actions gone = f.state.group_failed(failures_of(3, ExitStatus::killed_by(SIGTERM)));
  CHECK(names(gone) == Names{"PrintSummary", "Exit"});
  CHECK(exit_code(gone) == 7);
}

TEST_CASE("agent: restart stops the workers, then joins again", "[unit][agent]") {
  Fixture f;
  SECTION("workers running") {
    f.run_round();
    Actions restart = f.state.restart("node b failed");
    CHECK(names(restart) == Names{"Say", "StopGroup"});
    CHECK(said(restart)[0] == "restarting the workers: node b failed");
    CHECK(f.state.phase() == Phase::Restarting);
    CHECK(names(f.state.group_stopped()) == Names{"SendJoin"});
  }
  SECTION("after reporting: at once") {
    f.fail_and_report();
    CHECK(names(f.state.restart("rank 3 failed")) == Names{"Say", "SendJoin"});
  }
  CHECK(f.state.phase() == Phase::Joining);
  CHECK(names(f.state.round_assigned(round_number(1))) == Names{"Say", "StartGroup"});
}

TEST_CASE(
    "agent: a failure during a restart is only sent for the daemon to compare before it rejoins",
    "[unit][agent]") {
  Fixture f;
  f.run_round(2);
  f.state.restart("node b failed");
  Actions gone = f.state.group_failed(failures_of(3, ExitStatus::exited(1)));
  CHECK(names(gone) == Names{"ReportFailure", "SendJoin"});
  ReportFailure late = *find<ReportFailure>(gone);
  CHECK(late.late);
  CHECK(late.report.round == 2);
  CHECK(late.report.cause == "exit code 1");
  CHECK(f.state.phase() == Phase::Joining);

  // Replaced by a new round while they stopped: the failure is still the old round's.
  f.state.round_assigned(round_number(3));
  f.state.round_assigned(round_number(4));
  gone = f.state.group_failed(failures_of(3, ExitStatus::exited(1)));
  REQUIRE(find<ReportFailure>(gone));
  CHECK(find<ReportFailure>(gone)->report.round == 3);
  CHECK(find<StartGroup>(gone)->round.round == 4);
  // Stopped by the restart itself: nothing to compare.
  f.state.restart("node c failed");
  CHECK(names(f.state.group_failed({})) == Names{"SendJoin"});
  f.state.round_assigned(round_number(5));
  f.state.restart("node c failed");
  CHECK(names(f.state.group_stopped()) == Names{"SendJoin"});
  // A worker that failed with a code of its own once told to stop: sent to compare.
  f.state.round_assigned(round_number(6));
  f.state.restart("node c failed");
  gone = f.state.group_stopped(failures_of(3, ExitStatus::exited(1)));
  CHECK(names(gone) == Names{"ReportFailure", "SendJoin"});
  CHECK(find<ReportFailure>(gone)->late);
  CHECK(find<ReportFailure>(gone)->report.round == 6);
}

TEST_CASE("agent: a round while the workers run replaces them", "[unit][agent]") {
  Fixture f;
  f.run_round(0);
  Actions round = f.state.round_assigned(round_number(1));
  CHECK(names(round) == Names{"Say", "StopGroup"});
  CHECK(f.state.phase() == Phase::Restarting);
  SECTION("the new round starts once they are gone") {
    Actions gone = f.state.group_stopped();
    CHECK(names(gone) == Names{"StartGroup"});
    CHECK(find<StartGroup>(gone)->round.round == 1);
  }
  SECTION("the latest word wins while they stop, without stopping them twice") {
    CHECK(names(f.state.restart("node c left")) == Names{"Say"});
    CHECK(names(f.state.group_stopped()) == Names{"SendJoin"});
  }
}

TEST_CASE("agent: stop while the workers are still draining for a restart", "[unit][agent]") {
  Fixture f;
  f.run_round();
  f.state.restart("node b failed");
  CHECK(f.state.stop(stop_with(9, "SUMMARY")).empty());  // already stopping
  CHECK(f.state.phase() == Phase::Ending);
  Actions gone = f.state.group_stopped();
  CHECK(names(gone) == Names{"PrintSummary", "Exit"});
  CHECK(exit_code(gone) == 9);
}

TEST_CASE("agent: signals before the first round exit at once with 128 + signal", "[unit][agent]") {
  Fixture f;
  Actions actions = f.state.signal(SIGINT, kNoon);
  CHECK(names(actions) == Names{"Leave", "Exit"});
  CHECK(find<Leave>(actions)->reason == "stopped by SIGINT");
  CHECK(exit_code(actions) == 130);
  CHECK(f.state.phase() == Phase::Finished);
  CHECK(f.state.signal(SIGTERM, kNoon).empty());
}

TEST_CASE("agent: a signal stops the workers with it, a second one kills them", "[unit][agent]") {
  Fixture f;
  f.run_round();
  Actions first = f.state.signal(SIGTERM, kNoon);
  CHECK(names(first) == Names{"Leave", "Say", "StopGroup"});
  CHECK(said(first)[0] ==
        "received SIGTERM: stopping the workers (SIGKILL after 30s, --shutdown-timeout)");
  CHECK(find<StopGroup>(first)->signal == SIGTERM);
  CHECK(f.state.phase() == Phase::Ending);

  Actions second = f.state.signal(SIGINT, kNoon);
  CHECK(names(second) == Names{"Say", "KillGroup"});
  CHECK(said(second)[0] == "received SIGINT again: killing the workers now");

  Actions gone = f.state.group_stopped();
  CHECK(names(gone) == Names{"Exit"});
  CHECK(exit_code(gone) == 128 + SIGTERM);
}

TEST_CASE("agent: one signal delivered twice at once stops the workers gently all the same",
          "[unit][agent]") {
  // `timeout 60 cohort run ...` sends SIGTERM to cohort and then to its own process group.
  Fixture f;
  f.run_round();
  CHECK(names(f.state.signal(SIGTERM, kNoon)) == Names{"Leave", "Say", "StopGroup"});
  Actions twice = f.state.signal(SIGTERM, kNoon + 249ms);
  CHECK(names(twice) == Names{"Say"});
  CHECK(said(twice)[0] == "SIGTERM again at once: the same one, delivered twice");
  CHECK(f.state.phase() == Phase::Ending);
  // Later, it is the user's second signal.
  CHECK(names(f.state.signal(SIGTERM, kNoon + 250ms)) == Names{"Say", "KillGroup"});
}

TEST_CASE("agent: a signal overrides a decided end and does not stop stopping workers twice",
          "[unit][agent]") {
  Fixture f;
  f.run_round();
  SECTION("while stopping for the run's stop") { f.state.stop(stop_with(7, "SUMMARY")); }
  SECTION("while stopping for a restart") { f.state.restart("node b failed"); }
  CHECK(names(f.state.signal(SIGHUP, kNoon)) == Names{"Leave", "Say"});
  Actions gone = f.state.group_stopped();
  CHECK(names(gone) == Names{"Exit"});
  CHECK(exit_code(gone) == 128 + SIGHUP);
}

TEST_CASE("agent: other signals are forwarded to live workers, absorbed ones only noted",
          "[unit][agent]") {
  Fixture f;
  CHECK(names(f.state.signal(SIGUSR1, kNoon)) == Names{"Say"});  // no workers yet
  f.run_round();
  Actions forwarded = f.state.signal(SIGUSR1, kNoon);
  CHECK(names(forwarded) == Names{"Say", "ForwardSignal"});
  CHECK(find<ForwardSignal>(forwarded)->signal == SIGUSR1);
  Actions absorbed = f.state.signal(SIGUSR2, kNoon);
  CHECK(names(absorbed) == Names{"Say"});
  CHECK(said(absorbed)[0] == "SIGUSR2: Slurm delivers it to the workers itself");
  CHECK(f.state.phase() == Phase::Running);
}

TEST_CASE("agent: a lost connection is reconnected while the workers keep running",
          "[unit][agent]") {
  Fixture f;
  f.run_round();
  ConnectionLoss kind = GENERATE(ConnectionLoss::Closed, ConnectionLoss::HeartbeatTimeout);
  Actions lost = f.state.connection_lost(kind, "the rendezvous stopped answering heartbeats");
  CHECK(names(lost) == Names{"Say", "ReconnectAfter"});
  CHECK(said(lost)[0] ==
        "the rendezvous stopped answering heartbeats; reconnecting (the workers keep running)");
  CHECK(find<ReconnectAfter>(lost)->delay == kReconnectDelay);
  CHECK(names(f.state.reconnect_due()) == Names{"Connect"});
  CHECK(f.state.phase() == Phase::Running);
  // The workers' outcome still goes to the daemon, on the new connection.
  CHECK(names(f.state.group_succeeded()) == Names{"Say", "ReportSuccess"});
}

TEST_CASE("agent: a lost connection before any round says only that it reconnects",
          "[unit][agent]") {
  AgentState state(Settings{});
  state.start();
  Actions lost = state.connection_lost(ConnectionLoss::HeartbeatTimeout, "never answered");
  CHECK(names(lost) == Names{"Say", "ReconnectAfter"});
  CHECK(said(lost)[0] == "never answered; reconnecting");
}

TEST_CASE("agent: after a stall past the heartbeat timeout, the stale workers stop and it rejoins",
          "[unit][agent]") {
  Fixture f;
  f.run_round();
  Actions stalled = f.state.connection_lost(ConnectionLoss::Stalled, "did not run for 6000 ms");
  CHECK(names(stalled) == Names{"Say", "Disconnect", "StopGroup"});
  CHECK(said(stalled)[0] ==
        "did not run for 6000 ms: stopping the workers and rejoining as a new node");
  CHECK(f.state.phase() == Phase::Restarting);
  CHECK(names(f.state.group_stopped()) == Names{"Connect"});
  CHECK(f.state.phase() == Phase::Joining);
}

TEST_CASE("agent: an unreachable or untrusted rendezvous ends the run with exit code 3",
          "[unit][agent]") {
  Fixture f;
  SECTION("before the first round") {
    ConnectionLoss kind = GENERATE(ConnectionLoss::CannotReach, ConnectionLoss::Untrusted);
    Actions actions = f.state.connection_lost(kind, "cannot reach x:1");
    CHECK(names(actions) == Names{"Say", "Exit"});
    CHECK(std::get<Say>(actions[0]).level == log::Level::Error);
    CHECK(exit_code(actions) == kExitRendezvous);
  }
  SECTION("while the workers run: stopped first") {
    f.run_round();
    CHECK(names(f.state.connection_lost(ConnectionLoss::CannotReach, "cannot reach x:1")) ==
          Names{"StopGroup"});
    Actions gone = f.state.group_stopped();
    CHECK(said(gone) == std::vector<std::string>{"cannot reach x:1"});
    CHECK(exit_code(gone) == kExitRendezvous);
  }
}

TEST_CASE("agent: the daemon lost while stopping changes nothing", "[unit][agent]") {
  Fixture f;
  f.run_round();
  f.state.stop(stop_with(7, "SUMMARY"));
  CHECK(f.state.connection_lost(ConnectionLoss::Closed, "connection closed").empty());
  CHECK(f.state.reconnect_due().empty());
  CHECK(f.state.round_assigned(round_number(5)).empty());
  CHECK(exit_code(f.state.group_stopped()) == 7);
}

TEST_CASE("agent: dropped after a heartbeat loss, it stops its workers and rejoins as new",
          "[unit][agent]") {
  Fixture f;
  f.run_round();
  Actions dropped = f.state.error(proto::Error{"heartbeat timeout", true});
  CHECK(names(dropped) == Names{"Say", "Disconnect", "StopGroup"});
  CHECK(said(dropped)[0] ==
        "the rendezvous dropped this node (heartbeat timeout): rejoining as a new node");
  CHECK(names(f.state.group_stopped()) == Names{"Connect"});
  CHECK(f.state.phase() == Phase::Joining);
  CHECK(names(f.state.round_assigned(round_number(1))) == Names{"Say", "StartGroup"});
}

TEST_CASE("agent: a refusal by the daemon ends the run with exit code 3", "[unit][agent]") {
  Fixture f;
  f.run_round();
  Actions refused = f.state.error(proto::Error{"run 'x' has already finished", false});
  CHECK(names(refused) == Names{"Disconnect", "StopGroup"});
  Actions gone = f.state.group_stopped();
  CHECK(said(gone) == std::vector<std::string>{"rendezvous: run 'x' has already finished"});
  CHECK(exit_code(gone) == kExitRendezvous);
}

// In a Slurm step the endpoint's port is derived from the job and step: a rendezvous there that
// refuses the token is most likely another job's, which the refusal alone did not say.
TEST_CASE("agent: a refused token at an endpoint cohort chose says why and what to give",
          "[unit][agent]") {
  Settings hinted = settings(false);
  hinted.refused_token_hint = " (n1:31239 is the endpoint cohort derived ...)";
  AgentState state(hinted);
  state.start();
  std::string denied = "authentication failed: the proof does not match this rendezvous's token";
  Actions refused = state.error(proto::Error{denied, false});
  CHECK(exit_code(refused) == kExitRendezvous);
  CHECK(said(refused) ==
        std::vector<std::string>{"rendezvous: " + denied +
                                 " (n1:31239 is the endpoint cohort derived ...)"});
  // Other refusals are not about the port.
  AgentState other(hinted);
  other.start();
  CHECK(said(other.error(proto::Error{"run 'x' has already finished", false})) ==
        std::vector<std::string>{"rendezvous: run 'x' has already finished"});
}

TEST_CASE("agent: the end of stdin under cohort launch stops like SIGHUP", "[unit][agent]") {
  Fixture f(true);
  f.run_round();
  Actions closed = f.state.stdin_closed(kNoon);
  CHECK(names(closed) == Names{"Say", "Leave", "Say", "StopGroup"});
  CHECK(find<StopGroup>(closed)->signal == SIGHUP);
  CHECK(f.state.stdin_closed(kNoon).empty());
  CHECK(exit_code(f.state.group_stopped()) == 128 + SIGHUP);
}

TEST_CASE("agent: the end of stdin after the run's stop is ignored", "[unit][agent]") {
  Fixture f(true);
  f.run_round();
  f.state.stop(stop_with(7, "SUMMARY"));
  CHECK(f.state.stdin_closed(kNoon).empty());
  CHECK(exit_code(f.state.group_stopped()) == 7);
}

TEST_CASE("agent: workers that cannot start, or stop unasked, end cohort with 1", "[unit][agent]") {
  Fixture f;
  f.run_round();
  SECTION("no log directory") {
    Actions failed = f.state.group_start_failed("cannot create /logs: denied");
    CHECK(said(failed) == std::vector<std::string>{"cannot create /logs: denied"});
    CHECK(exit_code(failed) == kExitInternal);
  }
  SECTION("stopped") { CHECK(exit_code(f.state.group_stopped()) == kExitInternal); }
  CHECK(f.state.phase() == Phase::Finished);
}

TEST_CASE("agent: nothing happens after the exit", "[unit][agent]") {
  Fixture f;
  f.state.signal(SIGTERM, kNoon);
  REQUIRE(f.state.phase() == Phase::Finished);
  CHECK(f.state.round_assigned(round_number(1)).empty());
  CHECK(f.state.restart("x").empty());
  CHECK(f.state.stop(stop_with(7, "S")).empty());
  CHECK(f.state.complete().empty());
  CHECK(f.state.error(proto::Error{"x", true}).empty());
  CHECK(f.state.connection_lost(ConnectionLoss::CannotReach, "x").empty());
  CHECK(f.state.group_succeeded().empty());
  CHECK(f.state.signal(SIGINT, kNoon).empty());
  CHECK(f.state.stdin_closed(kNoon).empty());
}

TEST_CASE("agent: waiting for nodes is shown at most once a second", "[unit][agent]") {
  Fixture f;
  TimePoint now = TimePoint(std::chrono::hours(1));
  proto::Waiting short_of_nodes{1, 2, 3, std::nullopt};
  Actions shown = f.state.waiting(short_of_nodes, now);
  REQUIRE(find<ShowProgress>(shown));
  CHECK(find<ShowProgress>(shown)->line == "cohort: waiting for nodes: 1/2-3\n");
  CHECK(find<ShowProgress>(shown)->level == log::Level::Warn);
  CHECK(f.state.waiting(short_of_nodes, now + 999ms).empty());
  proto::Waiting last_call{2, 2, 2, 1500};
  CHECK(f.state.waiting(last_call, now + 1000ms).empty());  // enough nodes, no more to come
  proto::Waiting more_may_come{2, 2, 3, 1500};
  Actions again = f.state.waiting(more_may_come, now + 1000ms);
  REQUIRE(find<ShowProgress>(again));
  CHECK(find<ShowProgress>(again)->line == "cohort: waiting for nodes: 2/2-3, last call in 2 s\n");
}

TEST_CASE("agent: under cohort launch waiting is shown at info level", "[unit][agent]") {
  Fixture f(true);
  Actions shown = f.state.waiting(proto::Waiting{1, 2, 2, std::nullopt}, TimePoint());
  REQUIRE(find<ShowProgress>(shown));
  CHECK(find<ShowProgress>(shown)->level == log::Level::Info);
  CHECK(find<ShowProgress>(shown)->line == "cohort: waiting for nodes: 1/2\n");
}

TEST_CASE("agent: a node unhealthy for the join timeout stops its workers gently, then ends",
          "[unit][agent]") {
  Fixture f;
  SECTION("no workers: at once") {
    Actions actions = f.state.stayed_unhealthy("unhealthy for 600 s");
    CHECK(names(actions) == Names{"Disconnect", "Say", "Exit"});
    CHECK(exit_code(actions) == kExitRendezvous);
  }
  SECTION("while the workers run: SIGTERM and the grace period first") {
    f.run_round();
    Actions actions = f.state.stayed_unhealthy("unhealthy for 600 s");
    CHECK(names(actions) == Names{"Disconnect", "StopGroup"});
    CHECK(std::get<StopGroup>(actions[1]).signal == SIGTERM);
    CHECK(f.state.end_decided());
    CHECK(f.state.stayed_unhealthy("again").empty());
    Actions gone = f.state.group_stopped();
    CHECK(said(gone) == std::vector<std::string>{"unhealthy for 600 s"});
    CHECK(exit_code(gone) == kExitRendezvous);
  }
}

TEST_CASE("agent: a crash loop is named only while restarts are left", "[unit][agent]") {
  // --max-same-failures 3 (the default): the third identical failure ends the run.
  AgentState state(settings(false));
  state.start();
  auto fail = [&](int round, int restarts_used, int max_restarts) {
    state.round_assigned(round_number(round, restarts_used, max_restarts));
    REQUIRE(state.phase() == Phase::Running);
    auto report = find<ReportFailure>(state.group_failed(failures_of(3, ExitStatus::exited(7))));
    REQUIRE(report);
    return report->report;
  };
  SECTION("restarts left: the loop ends the run") {
    fail(0, 0, 5);
    fail(1, 1, 5);
    proto::WorkerFailed third = fail(2, 2, 5);
    CHECK(third.final_reason == "a crash loop: the same failure 3 times in a row (exit code 7)");
  }
  SECTION("the last restart used: the run ends for that, as torchrun's would") {
    fail(0, 0, 2);
    fail(1, 1, 2);
    proto::WorkerFailed third = fail(2, 2, 2);
    CHECK(third.final_reason.empty());
    CHECK(third.summary.find("crash loop") == std::string::npos);
  }
}
