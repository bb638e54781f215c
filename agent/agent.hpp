// The per-node agent of `cohort run`, as the I/O shell around AgentState: turns the daemon's
// messages, the loss of the connection, signals, the workers' outcome, stdin's end and timers
// into events, and carries out the actions that come back (the control connection, the worker
// group, log lines, the exit). Ends with one exit code (0, the root-cause worker's code,
// 128 + signal, or a rendezvous failure). Created by the launcher on the main thread, which
// runs the io_context.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "agent/agent_config.hpp"
#include "agent/agent_events.hpp"
#include "agent/agent_state.hpp"
#include "agent/dump_reports.hpp"
#include "agent/file_timer_server.hpp"
#include "agent/gpu_health.hpp"
#include "agent/health_check.hpp"
#include "agent/later_endpoint_schedule.hpp"
#include "agent/log_layout.hpp"
#include "agent/output_config.hpp"
#include "agent/progress_deadlines.hpp"
#include "agent/torch_probe.hpp"
#include "agent/worker_binding.hpp"
#include "agent/worker_env.hpp"
#include "agent/worker_group.hpp"
#include "common/asio_clock.hpp"
#include "common/host_port.hpp"
#include "common/random_bits.hpp"
#include "process/child_reaper.hpp"
#include "process/group_keeper.hpp"
#include "process/posix_process_spawner.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/run_probe.hpp"

namespace cohort {

class Agent {
 public:
  Agent(boost::asio::io_context& io, AgentConfig config);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  /// Runs until the job ends; returns cohort's exit code.
  int run();

 private:
  void perform(agent::Actions actions);
  void perform(const agent::Action& action);
  void connect();
  void move_to_fallback(const std::string& why);
  bool moved_since_round() const;
  bool waits_for_round() const;
  void watch_endpoints();
  std::optional<size_t> endpoint_to_ask();
  void endpoint_answered(size_t endpoint, SteadyTime asked_at, const RunProbeAnswer& answer);
  void go_back(int live_nodes);
  void follow_run(size_t endpoint, int live_nodes);
  void switch_endpoint(size_t endpoint, const std::string& leave_reason);
  HostPort endpoint_at(size_t index) const;
  std::string endpoint_text(size_t index) const;
  proto::Hello make_hello(const std::string& node_id);
  void on_message(proto::ControlMessage message);
  void on_group_done(GroupOutcome outcome);
  void start_group(const proto::RoundAssigned& assigned);
  bool fits_world(const proto::RoundAssigned& round) const;
  agent::Actions on_round_assigned(const proto::RoundAssigned& round);
  void start_group_after_probe(const proto::RoundAssigned& assigned);
  void drop_pending_start();
  void report_bindings(const RoundInfo& round) const;
  std::vector<WorkerPlan> plan_workers(const RoundInfo& round) const;
  void report_failure(const agent::ReportFailure& failure);
  void reconnect_after(std::chrono::milliseconds delay);
  std::chrono::milliseconds connect_deadline();
  void start_file_timer();
  void keep_asked_files();
  void on_timer_expired(const ExpiredTimer& expired);
  void arm_signals();
  void pause_until_continued();
  void watch_stdin();
  void finish(int exit_code);
  void event(const Event& event);
  void check_health(std::function<void()> proceed);
  void health_checked(const std::string& problem, const std::function<void()>& proceed);
  void join_if_healthy();
  void start_torch_probe();
  void recheck_health_later();
  agent_events::Source event_source() const;
  int rank0_port() const;
  void report_progress_later();
  void send_progress(bool hang);
  void listen_for_dumps(const RoundInfo& round);
  std::chrono::milliseconds dump_timeout() const;
  void send_on_disk_report(int round, std::vector<FlightRecorderDump> dumps);

  boost::asio::io_context& io_;
  AgentConfig config_;
  EnvMap agent_env_;
  agent::AgentState state_;
  ChildReaper reaper_;
  GroupKeeper keeper_{io_};
  AsioClock clock_{io_};
  const SteadyTime started_ = clock_.now();     ///< a hello says how long ago (its age_ms)
  std::optional<SteadyTime> unanswered_since_;  ///< since no daemon has welcomed this agent
  PosixProcessSpawner spawner_{io_, reaper_, &keeper_};
  LogLayout logs_;
  boost::asio::signal_set signals_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> stdin_;  ///< under cohort launch
  boost::asio::steady_timer reconnect_timer_;
  std::unique_ptr<RendezvousClient> client_;     ///< from the first Connect to the exit
  std::unique_ptr<WorkerGroup> group_;           ///< the current round's; kept after it ends
  int group_round_ = -1;                         ///< the round group_ runs
  int group_base_rank_ = 0;                      ///< its local rank 0's global rank
  std::unique_ptr<FileTimerServer> file_timer_;  ///< TORCHELASTIC_ENABLE_FILE_TIMER=1 only
  std::unique_ptr<Timer> progress_timer_;        ///< the next progress report to the daemon
  int connection_ = 0;                           ///< numbers this agent's connections (node ids)
  size_t fallback_ = 0;         ///< 0: --rdzv-endpoint; n: the n-th --rdzv-fallback, moved to
  bool ever_welcomed_ = false;  ///< a daemon of the run welcomed this agent once
  bool may_move_on_ = false;    ///< the current connection's deadline is the fallback wait
  /// The daemon at the current endpoint welcomed this agent, lives in an agent and is gone: a
  /// refused connection there means it is gone for good.
  bool lost_agent_hosted_ = false;
  /// ... and it went silent for a heartbeat timeout (its machine may be down or cut off): a new
  /// connection there gets one heartbeat interval to be answered before the run moves on.
  bool lost_agent_host_silent_ = false;
  bool hosts_rendezvous_ = false;  ///< this process hosts the daemon at the current endpoint
  /// The endpoint (as fallback_ counts) whose daemon assigned this agent's last round, or where
  /// it followed the run to. Moved away from it and given no round since, the agent asks it now
  /// and then whether the run's other nodes are still there (a node cut off alone moved for
  /// nothing), and goes back if they are.
  std::optional<size_t> round_endpoint_;
  std::unique_ptr<Timer> endpoint_timer_ = clock_.make_timer();  ///< the next question
  std::unique_ptr<RunProbe> endpoint_probe_;                     ///< the question in flight
  size_t later_asked_ = 0;  ///< how many turns later endpoints had (they take turns)
  agent::LaterEndpointSchedule later_schedule_{config_.rendezvous.heartbeat_interval};
  /// Spreads later_schedule_'s waits.
  std::minstd_rand chance_{static_cast<std::minstd_rand::result_type>(random_u64())};
  std::set<size_t> hosted_endpoints_;  ///< the endpoints whose daemon this process hosts
  bool host_in_round_ = false;         ///< the agent hosting the daemon is a member of this round
  /// That host was a member of this agent's last round and is gone (its daemon refused, or
  /// stayed silent): told to the next daemon (Hello::last_round_host_lost), until a new round.
  bool last_round_host_lost_ = false;
  std::string node_base_id_;
  EventLog events_{"agent"};
  std::unique_ptr<HealthCheck> health_;                ///< --health-check only
  std::unique_ptr<GpuHealthCheck> gpu_health_;         ///< when the node has GPUs
  std::unique_ptr<TorchProbe> torch_probe_;            ///< Python workers: which torch they have
  std::optional<proto::RoundAssigned> pending_round_;  ///< its workers wait for the probe
  boost::asio::steady_timer health_retry_{io_};
  std::string unhealthy_;                      ///< why the last health check failed; "" healthy
  std::optional<SteadyTime> unhealthy_since_;  ///< the first failed check of this spell
  std::string stack_tool_;        ///< eu-stack, when hang detection is on and it is installed
  std::optional<int> exit_code_;  ///< set once, by finish
  /// Reports of the ranks' flight-recorder dumps, made off this thread, sent as they come; first
  /// to go, as it calls into the rest.
  DumpReports dump_reports_{io_, [this](proto::Collectives report) {
                              if (client_) client_->send(report);
                            }};
};

}  // namespace cohort
