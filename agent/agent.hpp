// The per-node agent of `cohort run`: joins the rendezvous, runs the local worker group for each
// round the daemon assigns, reports failures and success, stops and restarts the workers on the
// daemon's word, forwards signals, and ends with one exit code (0, the root-cause worker's code
// or 128 + signal). Created by the launcher on the main thread, which runs the io_context.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/log_layout.hpp"
#include "agent/output_config.hpp"
#include "agent/worker_env.hpp"
#include "agent/worker_group.hpp"
#include "common/clock.hpp"
#include "process/child_reaper.hpp"
#include "process/group_keeper.hpp"
#include "process/posix_process_spawner.hpp"
#include "rendezvous/client.hpp"

namespace cohort {

struct RendezvousSettings {
  std::string host = "127.0.0.1";
  uint16_t port = 29400;
  std::string address;           ///< what this node advertises (--local-addr or host name)
  std::optional<int> rank_hint;  ///< --node-rank (static) or SLURM_NODEID
  proto::WireRunConfig config;
  std::chrono::milliseconds heartbeat_interval{1000};
  bool rank0_store = false;  ///< --worker-store=rank0: worker rank 0 binds MASTER_PORT
  std::string token;         ///< the run's shared secret; empty: none
};

struct AgentConfig {
  std::string executable;         ///< resolved path of what each worker runs
  std::vector<std::string> args;  ///< its arguments; "${local_rank}" is substituted
  std::string entrypoint_name;    ///< the script or module, for the failure summary
  int nproc = 1;
  WorkerEnvSettings env;
  std::chrono::milliseconds shutdown_timeout{30000};
  std::vector<int> extra_signals;  ///< forwarded without stopping (SIGUSR1, ...)
  /// Caught but not forwarded: inside a Slurm step, Slurm signals every process of the step
  /// itself (SIGUSR1/SIGUSR2 of --signal), so forwarding would deliver them twice.
  std::vector<int> absorbed_signals;
  std::string log_dir;  ///< empty: temporary; "/dev/null": no files
  OutputConfig output;
  std::string host_name;
  RendezvousSettings rendezvous;
  /// Runs before cohort exits, with a continuation (an embedded daemon lets the other nodes
  /// hear the end of the run first). Empty: exit at once.
  std::function<void(std::function<void()>)> before_exit;
  /// Started by cohort launch: stdin is the ssh connection, and its end (EOF) stops the workers
  /// like SIGHUP; what every host would repeat (progress, warnings, the summary of another
  /// host's failure) is left to the launcher's console at info level.
  bool under_launch = false;
};

class Agent {
 public:
  Agent(boost::asio::io_context& io, AgentConfig config);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  /// Runs until the job ends; returns cohort's exit code.
  int run();

 private:
  enum class State { Joining, Running, Restarting, Reported, Finishing };

  void connect();
  proto::Hello make_hello();
  void on_message(proto::ControlMessage message);
  void on_round(const proto::RoundAssigned& round);
  void on_restart(const std::string& reason);
  void on_stop(const proto::Stop& stop);
  void on_error(const proto::Error& error);
  void on_lost(const std::string& reason);
  void on_waiting(const proto::Waiting& waiting);
  void start_group(const RoundInfo& round);
  std::vector<WorkerPlan> plan_workers(const RoundInfo& round) const;
  void on_group_done(GroupOutcome outcome);
  void report_failure(std::vector<WorkerFailure> failures);
  void on_signal(int signal);
  void arm_signals();
  void watch_stdin();
  void stop_group_then(int signal, std::function<void()> next);
  void finish(int exit_code);
  int rank0_port() const;

  boost::asio::io_context& io_;
  AgentConfig config_;
  EnvMap agent_env_;
  ChildReaper reaper_;
  GroupKeeper keeper_;
  AsioClock clock_{io_};
  PosixProcessSpawner spawner_{io_, reaper_, &keeper_};
  LogLayout logs_;
  boost::asio::signal_set signals_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> stdin_;  ///< under cohort launch
  boost::asio::steady_timer reconnect_timer_;
  std::unique_ptr<RendezvousClient> client_;
  std::unique_ptr<WorkerGroup> group_;
  std::function<void()> after_group_;  ///< what to do once the running group has stopped
  State state_ = State::Joining;
  bool group_running_ = false;
  int round_ = -1;
  int restarts_seen_ = 0;
  int connection_ = 0;
  int stop_signal_ = 0;
  bool run_ended_ = false;
  std::string sent_summary_;  ///< the failure summary this node last reported  ///< the daemon said
                              ///< Stop: the exit code is the run's
  std::string node_base_id_;
  std::chrono::steady_clock::time_point last_progress_;
  std::optional<int> exit_code_;
};

}  // namespace cohort
