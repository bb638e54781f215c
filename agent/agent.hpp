// The per-node agent of `cohort run`: runs the local worker group round after round, restarts it
// after a failure while the restart budget lasts, forwards signals, and ends with one exit code
// (0, the root-cause worker's code or 128 + signal). Owns the io_context's work; created and run
// by the launcher on the main thread, which runs the io_context.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/child_reaper.hpp"
#include "agent/group_keeper.hpp"
#include "agent/log_layout.hpp"
#include "agent/output_config.hpp"
#include "agent/worker_env.hpp"
#include "agent/worker_group.hpp"

namespace cohort {

struct AgentConfig {
  std::string executable;          ///< resolved path of what each worker runs
  std::vector<std::string> args;   ///< its arguments; "${local_rank}" is substituted
  std::string entrypoint_name;     ///< the script or module, for the failure summary
  int nproc = 1;
  WorkerEnvSettings env;
  std::chrono::milliseconds shutdown_timeout{30000};
  std::vector<int> extra_signals;  ///< forwarded without stopping (SIGUSR1, ...)
  std::string log_dir;             ///< empty: temporary; "/dev/null": no files
  OutputConfig output;
  std::string master_addr = "127.0.0.1";
  int fixed_master_port = 0;       ///< 0: a free port for every round
  std::string host_name;
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
  void start_round();
  std::vector<WorkerPlan> plan_workers(const RoundInfo& round) const;
  void on_group_done(GroupOutcome outcome);
  void on_signal(int signal);
  void arm_signals();
  void fail(std::vector<WorkerFailure> failures);
  void finish(int exit_code);

  boost::asio::io_context& io_;
  AgentConfig config_;
  EnvMap agent_env_;
  ChildReaper reaper_;
  GroupKeeper keeper_;
  LogLayout logs_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer restart_timer_;
  std::unique_ptr<WorkerGroup> group_;
  bool group_running_ = false;
  int round_ = 0;
  int restarts_done_ = 0;
  int stop_signal_ = 0;
  std::optional<int> exit_code_;
};

}  // namespace cohort
