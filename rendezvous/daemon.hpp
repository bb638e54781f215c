// The rendezvous daemon: serves the agents' control connections its ControlDoor lets in, runs one
// RunState per --rdzv-id (many runs at once, isolated), turns the state machines' actions into
// messages, hosts a fresh worker store (TCPStore server) for every round of every run, and keeps
// one timer for the earliest deadline. Waiting nodes hear of other nodes' joins coalesced, at most
// every kWaitingRefresh. Time and timers come from the Clock it is lent. `cohortd` runs it alone;
// `cohort run` and `cohort launch` embed it. io_context thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "common/byte_budget.hpp"
#include "common/clock.hpp"
#include "common/connection_gate.hpp"
#include "common/event_log.hpp"
#include "observe/http_server.hpp"
#include "rendezvous/control_door.hpp"
#include "rendezvous/control_session.hpp"
#include "rendezvous/daemon_metrics.hpp"
#include "rendezvous/daemon_options.hpp"
#include "rendezvous/daemon_pages.hpp"
#include "rendezvous/dump_gathering.hpp"
#include "rendezvous/ended_runs.hpp"
#include "rendezvous/event_history.hpp"
#include "rendezvous/moved_runs.hpp"
#include "rendezvous/run_state.hpp"
#include "store/store_server.hpp"

namespace cohort {

class RendezvousDaemon {
 public:
  RendezvousDaemon(boost::asio::io_context& io, Clock& clock, DaemonOptions options);
  ~RendezvousDaemon();
  RendezvousDaemon(const RendezvousDaemon&) = delete;
  RendezvousDaemon& operator=(const RendezvousDaemon&) = delete;

  /// Which listener the last start() could not open.
  enum class Listener { Control, EventLog, Http };
  boost::system::error_code start();
  Listener failed_listener() const { return failed_listener_; }
  uint16_t port() const { return door_.port(); }
  /// The bound HTTP port once start() succeeded; 0 without one.
  uint16_t http_port() const { return http_ ? http_->port() : 0; }
  /// Opens the HTTP pages on `port` (at the options' http_address) for a daemon started without
  /// them: a --rdzv-fallback's daemon takes the rendezvous at once and its pages once the port is
  /// free (the lost host's process may hold it a moment longer on the same machine).
  boost::system::error_code start_http(int port);
  void stop();
  /// True once every run it ever had has ended and no agent is connected (for embedding).
  bool idle() const { return runs_.empty() && sessions_.empty(); }
  /// Stops every run it has: each node hears Stop with `exit_status` (cohort launch's Ctrl-C).
  /// So does every agent that says hello afterwards: one still starting over ssh when the stop
  /// came must not open a new run and train on.
  void cancel_runs(int exit_status, const std::string& reason);
  /// This process was stopped and has continued (cohort run's Ctrl-Z, the agent in the same
  /// process): the silence of every node meanwhile was this daemon's own, so none is dropped
  /// for it; a node really gone is dropped a heartbeat timeout from now.
  void continue_after_pause();
  /// True while a run forms or runs (not once it completed, failed or was stopped).
  bool runs_going() const;
  /// Run `run_id` ended here: completed, failed or stopped (false before it ever formed).
  bool run_ended(const std::string& run_id) const { return ended_.has(run_id); }
  /// Called when a run ends (completed or failed) and is forgotten, or an agent's connection
  /// closes, and that leaves the daemon idle (maybe more than once).
  std::function<void()> on_idle;
  /// Called with each event as the daemon records it (what --event-log writes), on its thread:
  /// for the process that embeds it (cohort launch tells a host's return from "round.started").
  std::function<void(const Event& event)> on_event;
  /// What the daemon knows of its runs (what `cohort status` prints): every run, or `only_run`.
  proto::StatusReply status(const std::string& only_run = {}) const;
  /// The events it holds for each run, oldest first.
  const EventHistory& history() const { return history_; }
  /// What the rounds' worker stores hold together, for a store its host serves beside them
  /// (`cohortd --tcpstore-port`) to share.
  const std::shared_ptr<ByteBudget>& store_budget() const { return store_budget_; }

 private:
  /// How stale a waiting node's view of the round (joined/min/max) may get while others join.
  static constexpr std::chrono::milliseconds kWaitingRefresh{500};
  /// How long past a hung node's dump timeout the other nodes' dumps may still come.
  static constexpr std::chrono::milliseconds kDumpSlack{2000};
  /// The longest a hang's failure report waits for the other nodes' dumps, whatever a node asks.
  static constexpr std::chrono::milliseconds kMaxDumpWait{600000};

  struct Run {
    explicit Run(std::shared_ptr<ByteBudget> all_dumps)
        : dumps(rdzv::kMaxGatheredDumpBytes, std::move(all_dumps)) {}

    std::unique_ptr<rdzv::RunState> state;
    std::unique_ptr<StoreServer> store;
    std::map<std::string, std::shared_ptr<ControlSession>> sessions;  ///< by node id
    std::map<std::string, int> rank0_ports;  ///< classic mode: ports the nodes offered
    std::unique_ptr<Timer> waiting_refresh;  ///< armed: a refresh is due
    bool refresh_armed = false;
    std::string last_failure;  ///< the latest restart's or stop's reason (cohort status)
    std::string stopped_by;    ///< set when stopped from outside: "cohort stop", "launch"
    std::string stopper;       ///< cohort stop's "user@host", when it said
    /// Why each node the state machine holds as unhealthy (parked) failed its health check.
    std::map<std::string, std::string> unhealthy;  ///< node id -> why
    /// node id -> the host name its progress reports or failures gave: events about the node
    /// carry it (the timeline labels nodes by it). Forgotten with the node, once its loss or
    /// leave is recorded.
    std::map<std::string, std::string> hosts;
    std::vector<rdzv::Assignment> round_members;  ///< the current round's, with their ranks
    /// The node whose agent hosts this daemon (its hello said so; an agent-hosted daemon only):
    /// each round's members hear whether it is one of them (RoundAssigned::host_member).
    std::string host_node;
    /// After a hang: every member's flight-recorder dumps, and the failure report held for them.
    rdzv::DumpGathering dumps;
    std::unique_ptr<Timer> dumps_deadline;
  };

  std::shared_ptr<ControlSession> make_session(boost::asio::ip::tcp::socket socket);
  bool take_store_client(boost::asio::ip::tcp::socket socket, const std::string& peer);
  void on_message(ControlSession& session, proto::ControlMessage message);
  void on_hello(ControlSession& session, const proto::Hello& hello);
  std::optional<rdzv::TimePoint> agent_started(const proto::Hello& hello) const;
  Run* member_run(const ControlSession& session);
  /// A member's message, by type; a message no member sends is a protocol error.
  template <typename Message>
  void on_member(Run& run, ControlSession& session, const Message& message);
  void on_member(Run& run, ControlSession& session, const proto::Heartbeat& heartbeat);
  void on_member(Run& run, ControlSession& session, const proto::Join& join);
  void on_member(Run& run, ControlSession& session, const proto::Unhealthy& unhealthy);
  void on_member(Run& run, ControlSession& session, const proto::WorkerFailed& failed);
  void on_member(Run& run, ControlSession& session, const proto::HangDeclared& hang);
  void on_member(Run& run, ControlSession& session, const proto::Collectives& collectives);
  void on_member(Run& run, ControlSession& session, const proto::Progress& progress);
  void on_member(Run& run, ControlSession& session, const proto::NodeSucceeded& succeeded);
  void on_member(Run& run, ControlSession& session, const proto::Leave& leave);
  static std::string hello_problem(const proto::Hello& hello);
  void on_status(ControlSession& session, const proto::StatusRequest& request);
  proto::StatusRun run_summary(const std::string& id, const Run& run) const;
  std::vector<proto::MovedRun> moved_runs(const std::string& only_run) const;
  std::string no_run_text(const std::string& run_id) const;
  proto::StatusReply brief_status(const std::string& only_run,
                                  const std::string& own_node_prefix) const;
  void on_events(ControlSession& session, const proto::EventsRequest& request);
  void on_stop_run(ControlSession& session, const proto::StopRunRequest& request);
  void answer_query(ControlSession& session, const proto::ControlMessage& reply,
                    const std::string& reason);
  std::optional<std::string> request_key(
      const std::string& proof, const std::string& run_id,
      const std::function<std::string(const std::string& key)>& expected) const;
  template <typename Answer>
  void prove_answer(const ControlSession& session, const std::string& key, std::string_view kind,
                    const std::string& client_nonce, const std::string& run_id,
                    Answer& answer) const;
  std::optional<std::string> proven_key(const ControlSession& session,
                                        const proto::Hello& hello) const;
  void on_closed(ControlSession& session, const std::string& reason);
  /// Drops a closed connection, and the node it was, from the daemon's books.
  void forget_session(ControlSession& session, const std::string& reason);
  void park_unhealthy(Run& run, const std::string& node_id, const std::string& reason);
  void on_hang_declared(Run& run, const std::string& node_id, const proto::HangDeclared& hang);
  void on_worker_failed(Run& run, const std::string& node_id, const proto::WorkerFailed& failed);
  void finish_dumps(Run& run);
  void apply(Run& run, rdzv::Actions actions);
  /// One action of the run's state machine, by type.
  void carry_out(Run& run, const rdzv::WaitingStatus& waiting);
  void carry_out(Run& run, const rdzv::StartRound& start);
  void carry_out(Run& run, const rdzv::RestartMembers& restart);
  void carry_out(Run& run, const rdzv::StopRun& stop_run);
  void carry_out(Run& run, const rdzv::CompleteRun& complete);
  void carry_out(Run& run, const rdzv::FormingTimedOut& timed_out);
  void carry_out(Run& run, const rdzv::DropNode& dropped);
  void carry_out(Run& run, const rdzv::Announce& announce);
  void carry_out(Run& run, const rdzv::HostExcluded& excluded);
  void send_waiting(Run& run, const rdzv::WaitingStatus& status);
  void refresh_waiting_later(Run& run);
  void start_round(Run& run, const rdzv::StartRound& start);
  void send_to(Run& run, const std::vector<std::string>& node_ids,
               const proto::ControlMessage& message);
  void drop(Run& run, const std::string& node_id, const std::string& reason, bool lost);
  void reap_runs();
  /// A run whose nodes all went while it was forming or running (no end of its own recorded).
  void record_abandoned(const std::string& id, const Run& run);
  void record(const std::string& run, const char* name, nlohmann::json fields);
  /// The host name the run's node gave (progress, a failure); "" when it gave none yet.
  std::string known_host(const std::string& run, const std::string& node) const;
  void record_round(Run& run, const rdzv::StartRound& start);
  void record_loss(Run& run, const std::string& node, const std::string& reason, rdzv::Ms silent);
  int64_t event_ms() const;
  void schedule();
  boost::system::error_code open_http();
  MetricsSnapshot metrics_snapshot() const;
  rdzv::TimePoint now() const { return clock_.now(); }

  boost::asio::io_context& io_;
  Clock& clock_;
  DaemonOptions options_;
  std::shared_ptr<ByteBudget> store_budget_;  ///< every round's store takes from it
  /// Every run's gathered flight-recorder dumps take from it (rdzv::kMaxAllGatheredDumpBytes).
  std::shared_ptr<ByteBudget> dump_budget_;
  ControlDoor door_;
  std::unique_ptr<Timer> timer_;
  std::optional<rdzv::TimePoint> timer_armed_for_;  ///< the deadline timer_ waits for
  std::map<std::string, Run> runs_;
  std::set<std::shared_ptr<ControlSession>> sessions_;
  std::map<std::string, rdzv::NodeInfo> nodes_;     ///< node id -> what its hello said
  std::map<std::string, rdzv::RunConfig> configs_;  ///< node id -> the settings it asked for
  DaemonMetrics metrics_;
  EventLog event_log_{"daemon"};
  EventHistory history_;
  SteadyTime started_steady_;  ///< events' times: the wall clock at start plus the steady time
  int64_t started_wall_ms_ = 0;
  std::unique_ptr<observe::HttpServer> http_;
  Listener failed_listener_ = Listener::Control;
  size_t pending_reply_bytes_ = 0;  ///< of answer_query()'s replies, not yet read
  int applying_ = 0;  ///< apply() calls in progress: runs are reaped only outside them
  bool stopped_ = false;
  std::optional<proto::Stop> cancelled_;  ///< set by cancel_runs(): what later hellos hear
  rdzv::EndedRuns ended_;
  rdzv::MovedRuns moved_;  ///< runs whose last node here left for another endpoint  ///< what a
                           ///< node started before its run ended hears when it joins
};

/// What start() could not open, for the user: "--http-port 29477: cannot listen on
/// 127.0.0.1:29477: Address already in use". `control` words the control port's failure
/// ("cannot host the rendezvous on"); its address and port follow.
std::string start_failure_text(RendezvousDaemon::Listener failed, const DaemonOptions& options,
                               const boost::system::error_code& error, const std::string& control);

}  // namespace cohort
