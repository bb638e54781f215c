#include "agent/agent_state.hpp"

#include <algorithm>
#include <csignal>

#include "agent/failure_summary.hpp"
#include "agent/hang_report.hpp"
#include "common/exit_codes.hpp"
#include "common/run_id.hpp"
#include "common/signal_names.hpp"
#include "common/text.hpp"

namespace cohort::agent {
namespace {

using log::Level;

std::string progress_line(const proto::Waiting& waiting) {
  std::string line =
      cat("cohort: waiting for nodes: ", waiting.joined, "/",
          waiting.min_nodes == waiting.max_nodes ? std::to_string(waiting.max_nodes)
                                                 : cat(waiting.min_nodes, "-", waiting.max_nodes));
  if (waiting.last_call_in_ms) {
    line += cat(", last call in ", (*waiting.last_call_in_ms + 999) / 1000, " s");
  }
  return line + "\n";
}

// "worker rank=R failed with ...", and why cohort stopped it when it did (a hang, a timer).
std::string failure_line(const WorkerFailure& root) {
  std::string line = cat("worker rank=", root.rank, " failed with ", root.status.describe());
  if (!root.timer_expired.empty()) line += ": " + root.timer_expired;
  if (!root.hang) return line;
  line += ": " + hang_line(root, *root.hang);
  if (!root.hang->frames.empty()) line += "; hung in " + root.hang->frames.front();
  if (!root.hang->stacks_file.empty()) line += "; stacks in " + root.hang->stacks_file;
  return line;
}

Actions concat(Actions first, Actions second) {
  first.insert(first.end(), std::make_move_iterator(second.begin()),
               std::make_move_iterator(second.end()));
  return first;
}

}  // namespace

AgentState::AgentState(Settings settings)
    : settings_(std::move(settings)), crash_loop_(settings_.crash_loop) {}

Actions AgentState::start() {
  phase_ = Phase::Joining;
  return {Connect{}};
}

Actions AgentState::waiting(const proto::Waiting& waiting, TimePoint now) {
  if (end_decided()) return {};
  bool short_of_nodes = waiting.joined < waiting.min_nodes;
  bool last_call = waiting.last_call_in_ms && waiting.joined < waiting.max_nodes;
  if (!short_of_nodes && !last_call) return {};
  if (last_progress_ && now - *last_progress_ < std::chrono::seconds(1)) return {};
  last_progress_ = now;
  return {ShowProgress{settings_.under_launch ? Level::Info : Level::Warn, progress_line(waiting)}};
}

Actions AgentState::round_assigned(const proto::RoundAssigned& round) {
  if (end_decided()) return {};
  round_ = round.round;
  restarts_used_ = round.restarts_used;
  max_restarts_ = round.max_restarts;
  next_round_ = round;
  Actions joined{
      Say{Level::Info, cat("joined round=", round.round, " group_rank=", round.group_rank, " of ",
                           round.group_world_size, " world_size=", round.world_size,
                           " master=", round.master_addr, ":", round.master_port)}};
  return concat(std::move(joined), restart_then(Next::StartRound));
}

Actions AgentState::restart(const std::string& reason) {
  if (end_decided()) return {};
  return concat({Say{Level::Warn, "restarting the workers: " + reason}},
                restart_then(Next::Rejoin));
}

Actions AgentState::stop(const proto::Stop& stop) {
  if (end_decided()) return {};
  return end(stop.exit_status, farewell_for(stop), SIGTERM);
}

Actions AgentState::complete() {
  if (end_decided()) return {};
  if (round_ >= 0) {
    return concat({Say{Level::Info, "every node finished: the run is complete"}},
                  end(kExitSuccess, {}, SIGTERM));
  }
  // A spare, or a node of another job that shares the run id: it succeeded at nothing.
  std::string line = cat("run '", settings_.run_id,
                         "' completed while this node waited to join it: this node ran nothing");
  if (settings_.run_id == kDefaultRunId) {
    line += cat(" (every job that leaves out --rdzv-id joins run '", kDefaultRunId,
                "' on its rendezvous: give each job its own id)");
  }
  return concat({Say{settings_.under_launch ? Level::Info : Level::Warn, line}},
                end(kExitSuccess, {}, SIGTERM));
}

Actions AgentState::error(const proto::Error& error) {
  if (end_decided()) return {};
  if (!error.rejoin) {
    std::string hint =
        error.message.rfind("authentication failed", 0) == 0 ? settings_.refused_token_hint : "";
    return concat(
        {Disconnect{}},
        end(kExitRendezvous, {Say{Level::Error, "rendezvous: " + error.message + hint}}, SIGTERM));
  }
  return concat({Say{Level::Warn, cat("the rendezvous dropped this node (", error.message,
                                      "): rejoining as a new node")},
                 Disconnect{}},
                restart_then(Next::Reconnect));
}

Actions AgentState::connection_lost(ConnectionLoss kind, const std::string& reason) {
  if (end_decided()) return {};
  if (kind == ConnectionLoss::CannotReach || kind == ConnectionLoss::Untrusted) {
    return end(kExitRendezvous, {Say{Level::Error, reason}}, SIGTERM);
  }
  if (kind == ConnectionLoss::Stalled) {  // the workers run a round the others have left
    return concat({Say{Level::Warn, reason + ": stopping the workers and rejoining as a new node"},
                   Disconnect{}},
                  restart_then(Next::Reconnect));
  }
  std::string going_on =
      workers_alive() ? "; reconnecting (the workers keep running)" : "; reconnecting";
  return {Say{Level::Warn, reason + going_on}, ReconnectAfter{kReconnectDelay}};
}

Actions AgentState::reconnect_due() {
  if (end_decided()) return {};
  return {Connect{}};
}

Actions AgentState::stayed_unhealthy(const std::string& reason) {
  if (end_decided()) return {};
  return concat({Disconnect{}}, end(kExitRendezvous, {Say{Level::Error, reason}}, SIGTERM));
}

Actions AgentState::group_start_failed(const std::string& error) {
  if (phase_ == Phase::Finished) return {};
  return exit_now(kExitInternal, {Say{Level::Error, error}});
}

Actions AgentState::group_succeeded() {
  if (phase_ != Phase::Running) return workers_gone();
  phase_ = Phase::Reported;
  crash_loop_.succeeded();
  reported_ = {round_, std::nullopt};
  return {Say{Level::Info, "the workers of this node finished; waiting for the other nodes"},
          ReportSuccess{round_}};
}

Actions AgentState::group_failed(std::vector<WorkerFailure> failures) {
  if (phase_ == Phase::Restarting && !failures.empty()) {  // failed before the stop reached them
    const WorkerFailure& root = failures[root_cause_index(failures)];
    crash_loop_.judge(root);  // it counts toward this node's streak all the same
    return late_failure(root);
  }
  if (phase_ != Phase::Running) return workers_gone();
  if (failures.empty()) return group_stopped();
  for (WorkerFailure& failure : failures)
    failure.startup_failure = !failure.after_stop && crash_loop_.startup_failure(failure);
  const WorkerFailure& root = failures[root_cause_index(failures)];
  std::string final_reason = crash_loop_.judge(root, restarts_used_ < max_restarts_);
  sent_summary_ = format_failure_summary(settings_.entrypoint_name, settings_.host_name, failures);
  if (!final_reason.empty()) sent_summary_ += "cohort: not restarting: " + final_reason + "\n";
  phase_ = Phase::Reported;
  proto::WorkerFailed report = failure_report(root, sent_summary_, final_reason);
  reported_ = {round_, report};
  std::string& carried_summary = reported_.failure->summary;
  if (carried_summary.size() > proto::kMaxCarriedSummaryBytes) {
    carried_summary.resize(proto::kMaxCarriedSummaryBytes);
    carried_summary += "\n  (cut short)\n";
  }
  return {Say{Level::Warn, failure_line(root)}, ReportFailure{std::move(report), root}};
}

// A failure while restarting: reported only for the daemon to compare with the round's first.
Actions AgentState::late_failure(const WorkerFailure& root) {
  Actions actions{ReportFailure{failure_report(root, {}, {}), root, /*late=*/true}};
  Actions next = workers_gone();
  actions.insert(actions.end(), next.begin(), next.end());
  return actions;
}

proto::WorkerFailed AgentState::failure_report(const WorkerFailure& root,
                                               const std::string& summary,
                                               const std::string& final_reason) const {
  return proto::WorkerFailed{group_round_,
                             root.rank,
                             root.local_rank,
                             root.status.shell_code(),
                             root.status.describe().substr(0, proto::kMaxFailureTextBytes),
                             settings_.host_name,
                             cut_middle(summary, proto::kMaxFailureSummaryBytes),
                             final_reason.substr(0, proto::kMaxFailureTextBytes),
                             failure_cause(root).substr(0, proto::kMaxFailureCauseBytes)};
}

std::optional<proto::CarriedOutcome> AgentState::unanswered_outcome() const {
  if (phase_ != Phase::Reported) return std::nullopt;
  return reported_;
}

// Stopped for a restart, some workers still failed with codes of their own: maybe the failure
// that restarted the round, which the daemon finds out by comparing it with the first report.
Actions AgentState::group_stopped(const std::vector<WorkerFailure>& after_stop) {
  if (phase_ == Phase::Restarting && !after_stop.empty()) {
    const WorkerFailure& root = after_stop[root_cause_index(after_stop)];
    crash_loop_.failed_after_stop(root);
    return late_failure(root);
  }
  if (phase_ != Phase::Running) return workers_gone();
  return exit_now(kExitInternal, {});  // stopped, yet nobody asked: cohort cannot go on
}

Actions AgentState::signal(int signal, TimePoint now) {
  if (phase_ == Phase::Finished) return {};
  const std::vector<int>& absorbed = settings_.absorbed_signals;
  if (std::find(absorbed.begin(), absorbed.end(), signal) != absorbed.end()) {
    return {Say{Level::Info, signal_name(signal) + ": Slurm delivers it to the workers itself"}};
  }
  if (!is_termination_signal(signal)) {
    Actions actions{Say{Level::Info, "forwarding " + signal_name(signal) + " to the workers"}};
    if (workers_alive()) actions.push_back(ForwardSignal{signal});
    return actions;
  }
  if (stop_signal_ == signal && now - stop_signal_at_ < kRepeatedSignal) {
    return {
        Say{Level::Info, signal_name(signal) + " again at once: the same one, delivered twice"}};
  }
  if (stop_signal_ != 0) {
    Actions actions{
        Say{Level::Warn, "received " + signal_name(signal) + " again: killing the workers now"}};
    if (workers_alive()) actions.push_back(KillGroup{});
    return actions;
  }
  stop_signal_ = signal;
  stop_signal_at_ = now;
  Actions actions{Leave{"stopped by " + signal_name(signal)}};
  if (workers_alive()) {
    actions.push_back(Say{
        Level::Warn, cat("received ", signal_name(signal), ": stopping the workers (SIGKILL after ",
                         format_duration(settings_.shutdown_timeout), ", --shutdown-timeout)")});
  }
  return concat(std::move(actions), end(128 + signal, {}, signal));
}

Actions AgentState::stdin_closed(TimePoint now) {
  if (end_decided()) return {};
  return concat(
      {Say{Level::Warn,
           "the connection to cohort launch is gone (stdin closed): stopping the workers"}},
      signal(SIGHUP, now));
}

bool AgentState::workers_alive() const {
  return phase_ == Phase::Running || phase_ == Phase::Restarting || phase_ == Phase::Ending;
}

// Stops the workers if they run (the latest decision wins over an earlier one while they stop),
// else goes on at once.
Actions AgentState::restart_then(Next next) {
  next_ = next;
  if (!workers_alive()) return go_on();
  Actions actions;
  if (phase_ == Phase::Running) actions.push_back(StopGroup{SIGTERM});
  phase_ = Phase::Restarting;
  return actions;
}

// Decides the exit code (and what to say before exiting); exits once the workers are gone.
Actions AgentState::end(int exit_code, Actions farewell, int signal) {
  exit_code_ = exit_code;
  farewell_ = std::move(farewell);
  if (!workers_alive()) return finish();
  Actions actions;
  if (phase_ == Phase::Running) actions.push_back(StopGroup{signal});
  phase_ = Phase::Ending;
  return actions;
}

// The stopping workers are gone: exit, or go on with what was decided while they stopped.
Actions AgentState::workers_gone() {
  if (phase_ == Phase::Ending) return finish();
  if (phase_ == Phase::Restarting) return go_on();
  return {};
}

Actions AgentState::go_on() {
  switch (next_) {
    case Next::StartRound:
      phase_ = Phase::Running;
      group_round_ = next_round_.round;
      return {StartGroup{next_round_}};
    case Next::Rejoin:
      phase_ = Phase::Joining;
      return {SendJoin{}};
    case Next::Reconnect:
      phase_ = Phase::Joining;
      return {Connect{}};
  }
  return {};
}

Actions AgentState::exit_now(int exit_code, Actions farewell) {
  exit_code_ = exit_code;
  farewell_ = std::move(farewell);
  return finish();
}

Actions AgentState::finish() {
  phase_ = Phase::Finished;
  Actions actions = std::move(farewell_);
  farewell_.clear();
  actions.push_back(Exit{exit_code_});
  return actions;
}

// Under cohort launch every host's lines reach one console: only the host whose failure is the
// root cause prints the summary there.
Actions AgentState::farewell_for(const proto::Stop& stop) const {
  // The daemon may append the root cause it found across nodes to this node's summary.
  bool own = !sent_summary_.empty() && stop.summary.rfind(sent_summary_, 0) == 0;
  if (!stop.summary.empty() && (own || !settings_.under_launch)) {
    return {PrintSummary{stop.summary}};
  }
  if (!stop.stopped_by.empty()) {
    return {Say{settings_.under_launch ? Level::Info : Level::Warn,
                "the run was stopped by " + stop.stopped_by + ": " + stop.reason}};
  }
  if (stop.summary.empty() && !settings_.under_launch) {
    return {Say{Level::Error, "the run failed: " + stop.reason}};
  }
  return {Say{Level::Info, "the run failed: " + stop.reason}};
}

}  // namespace cohort::agent
