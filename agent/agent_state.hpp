// One node's agent as a pure state machine: which round it is in, whether its workers run or
// are being stopped and what comes once they are gone (the next round, a rejoin, a new
// connection, or the exit and its code), what it reported, and the signals it got. Events in
// (the daemon's messages, the loss of its connection, the workers' outcome, signals, the end of
// stdin, the reconnect timer), Actions out, which the Agent carries out in order. No I/O and no
// clock reads: time is passed in. Owned by the Agent; io thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "agent/crash_loop.hpp"
#include "agent/worker_failure.hpp"
#include "common/log.hpp"
#include "proto/control_messages.hpp"
#include "rendezvous/connection_loss.hpp"

namespace cohort::agent {

using Ms = std::chrono::milliseconds;
using TimePoint = std::chrono::steady_clock::time_point;

/// How long the agent waits before reconnecting after losing an established connection.
constexpr Ms kReconnectDelay{50};

struct Settings {
  std::string entrypoint_name;  ///< the failure summary's title
  std::string host_name;
  std::string run_id;         ///< for what a node that ran nothing says
  bool under_launch = false;  ///< cohort launch's console gets what every host would repeat
  Ms shutdown_timeout{30000};
  std::vector<int> absorbed_signals;  ///< caught, not forwarded (Slurm signals the workers)
  CrashLoopSettings crash_loop;       ///< failures not worth a restart
  /// Added to the rendezvous's refusal of this node's token when cohort chose the endpoint
  /// (RendezvousSettings::refused_token_hint); empty: the refusal as it is.
  std::string refused_token_hint;
};

// Actions: what the machine decided; the Agent turns them into sockets, processes and output.

/// Open a new connection to the rendezvous (hello first); the old one is closed already.
struct Connect {};
/// Arm the reconnect timer; when it fires, tell the machine reconnect_due().
struct ReconnectAfter {
  Ms delay;
};
/// Ready for the next round, on the current connection.
struct SendJoin {};
struct ReportSuccess {
  int round = 0;
};
/// Send the report; write the root cause to the agent's own error file if it was given one.
/// `late`: the round was already restarting for another node's report; only send it, so that
/// the daemon can tell a failure every node shares (the job's) from one host's.
struct ReportFailure {
  proto::WorkerFailed report;
  WorkerFailure root_cause;
  bool late = false;
};
/// Send `leave` if connected, then close the connection.
struct Leave {
  std::string reason;
};
/// Close the connection without a word.
struct Disconnect {};
struct StartGroup {
  proto::RoundAssigned round;
};
/// Send the signal to the workers, SIGKILL after the shutdown timeout; nothing if the group is
/// stopping already (on its own after a worker failed, or asked before).
struct StopGroup {
  int signal = 0;
};
/// SIGKILL every worker now.
struct KillGroup {};
struct ForwardSignal {
  int signal = 0;
};
/// A line of cohort's log, at this level.
struct Say {
  log::Level level;
  std::string text;
};
/// "cohort: waiting for nodes: ..." on stderr, when the level is enabled.
struct ShowProgress {
  log::Level level;
  std::string line;
};
/// The failure summary, as it is, on stderr.
struct PrintSummary {
  std::string summary;
};
/// Close everything and exit with this code.
struct Exit {
  int code = 0;
};

using Action = std::variant<Connect, ReconnectAfter, SendJoin, ReportSuccess, ReportFailure, Leave,
                            Disconnect, StartGroup, StopGroup, KillGroup, ForwardSignal, Say,
                            ShowProgress, PrintSummary, Exit>;
using Actions = std::vector<Action>;

class AgentState {
 public:
  enum class Phase {
    Joining,     ///< waiting for a round; no workers
    Running,     ///< the round's workers run
    Reported,    ///< the workers ended and their outcome is sent: waiting for the daemon's word
    Restarting,  ///< the workers are stopping; then the next round, a rejoin or a new connection
    Ending,      ///< the exit code is decided; the workers are stopping
    Finished,    ///< Exit was sent; every later event is ignored
  };

  explicit AgentState(Settings settings);

  Actions start();

  // The daemon and the connection to it. Once the end is decided, they are ignored.
  Actions waiting(const proto::Waiting& waiting, TimePoint now);
  Actions round_assigned(const proto::RoundAssigned& round);
  Actions restart(const std::string& reason);
  Actions stop(const proto::Stop& stop);
  Actions complete();
  Actions error(const proto::Error& error);
  Actions connection_lost(ConnectionLoss kind, const std::string& reason);
  Actions reconnect_due();
  /// The node's health checks kept failing for the join timeout: it ends (exit 3), its workers
  /// (of a round the others may have left) stopped with the grace period first.
  Actions stayed_unhealthy(const std::string& reason);

  // The workers of the current round.
  Actions group_start_failed(const std::string& error);
  Actions group_succeeded();
  /// The crash-loop rule may make the failure final (the report says why).
  Actions group_failed(std::vector<WorkerFailure> failures);
  /// `after_stop`: workers that exited with a failing code of their own once told to stop.
  Actions group_stopped(const std::vector<WorkerFailure>& after_stop = {});

  // The outside: signals to cohort, and (under cohort launch) the end of stdin. A second
  // termination signal kills the workers at once, unless it is the first one again within
  // kRepeatedSignal (`timeout` and `kill 0` deliver one signal to cohort twice: to it, and to
  // its process group).
  static constexpr std::chrono::milliseconds kRepeatedSignal{250};
  Actions signal(int signal, TimePoint now);
  Actions stdin_closed(TimePoint now);

  Phase phase() const { return phase_; }
  /// The agent ends once its workers are gone (or has ended).
  bool end_decided() const { return phase_ == Phase::Ending || phase_ == Phase::Finished; }
  int round() const { return round_; }  ///< the last round assigned, -1 before the first
  /// How many nodes the last round had; 0 before the first.
  int round_nodes() const { return round_ < 0 ? 0 : next_round_.group_world_size; }
  int restarts_used() const { return restarts_used_; }
  /// The outcome this node reported for its round and the daemon has not answered yet (the
  /// daemon may have died before reading it): a new connection's hello carries it.
  std::optional<proto::CarriedOutcome> unanswered_outcome() const;

 private:
  /// What comes once the stopping workers are gone, in Restarting.
  enum class Next { StartRound, Rejoin, Reconnect };

  bool workers_alive() const;
  Actions restart_then(Next next);
  Actions end(int exit_code, Actions farewell, int signal);
  Actions workers_gone();
  Actions late_failure(const WorkerFailure& root);
  /// The report of the workers' round's failure with `root` as its root cause.
  proto::WorkerFailed failure_report(const WorkerFailure& root, const std::string& summary,
                                     const std::string& final_reason) const;
  Actions go_on();
  Actions exit_now(int exit_code, Actions farewell);
  Actions finish();
  Actions farewell_for(const proto::Stop& stop) const;

  Settings settings_;
  CrashLoopRule crash_loop_;
  Phase phase_ = Phase::Joining;
  Next next_ = Next::Rejoin;         ///< in Restarting
  proto::RoundAssigned next_round_;  ///< for Next::StartRound
  int exit_code_ = 0;                ///< in Ending and Finished
  Actions farewell_;                 ///< said before exiting, once the workers are gone
  int round_ = -1;
  int group_round_ = -1;  ///< the round the workers (running or stopping) were started for
  int restarts_used_ = 0;
  int max_restarts_ = 0;                    ///< the run's --max-restarts, as the last round said
  int stop_signal_ = 0;                     ///< the first termination signal, 0 before one
  TimePoint stop_signal_at_{};              ///< when it came
  std::string sent_summary_;                ///< the failure summary this node last reported
  proto::CarriedOutcome reported_;          ///< what this node last reported, in Reported
  std::optional<TimePoint> last_progress_;  ///< when "waiting for nodes" was last shown
};

}  // namespace cohort::agent
