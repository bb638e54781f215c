// Runs a planned `cohort launch`: hosts the rendezvous daemon (unless the plan names a running
// cohortd), starts `cohort run` on every host at once through the system ssh (or as Slurm job
// steps through srun), one session per host, and lets the run start only once every host's agent
// said it is ready (nothing starts otherwise); copies their lines to this console, starts a host
// lost over ssh again while the run goes on without it (--host-retries), and tears everything
// down on Ctrl-C, or when a lost host leaves too few for the run. Each remote agent watches its
// stdin (the ssh connection, or srun's) and stops its workers when it ends. Children start
// through the ProcessSpawner, waits run on the Clock. Created by main; io thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.hpp"
#include "launcher/launch/launch_plan.hpp"
#include "process/process_spawner.hpp"
#include "process/spawned_child.hpp"
#include "rendezvous/daemon.hpp"

namespace cohort {

class Launch {
 public:
  Launch(boost::asio::io_context& io, Clock& clock, ProcessSpawner& spawner, LaunchPlan plan);
  ~Launch();
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  /// Runs until every host's ssh has ended; returns the launch's exit code.
  int run();

 private:
  /// One ssh (or srun) process that carries a host's agent, with the pumps of its stdout and
  /// stderr.
  struct Remote {
    explicit Remote(boost::asio::io_context& io) : child(io) {}

    size_t index = 0;
    std::string name;
    SpawnedChild child;
    SteadyTime started{};  ///< when its ssh started
    int stdin_fd = -1;     ///< our end of its stdin; closing it tells the remote agent to stop
    bool ready = false;    ///< its agent said it is ready (or, before the start, it ended)
    std::function<void(Remote&)> on_end;  ///< runs once it exited and both streams ended
  };

  bool spawn(Remote& remote, const std::string& remote_line, const PumpTarget& out,
             const PumpTarget& err, SshRole role);
  void share_connections();
  void close_shared_connections(std::function<void()> done);
  void maybe_ended(Remote& remote);
  bool start_daemon();
  void start_every_host();
  bool start_host(size_t index, std::chrono::milliseconds launched_ago);
  void on_ready(Remote& remote, std::string_view version);
  void on_start_ended(Remote& remote);
  std::string start_problem(const Remote& remote) const;
  void start_when_ready();
  /// What each agent reads on stdin first: the token line and the secrets line.
  std::string handshake_lines() const;
  bool any_unreachable() const;
  void abort_start(int exit_code);
  void rejoin_later(size_t index);
  void say_who_is_back(const Event& event);
  void warn_about_threads() const;
  void on_host_ended(Remote& remote);
  void check_hosts_left(const std::string& host, const std::string& how, bool lost);
  void on_signal(int signal);
  void arm_signals();
  void tear_down(int exit_status, const std::string& reason);
  void close_stdins();
  void kill_all(std::vector<std::unique_ptr<Remote>>& remotes);
  void kill(Remote& remote);
  void give_up(Remote& remote);
  void finish(int exit_code);
  std::string endpoint() const;
  bool srun() const;                   ///< the hosts are started as Slurm job steps
  bool ssh() const;                    ///< the hosts are started over ssh
  bool local() const;                  ///< the hosts, all this machine, by its own shell
  std::string transport_name() const;  ///< "ssh", "srun" or "sh"

  boost::asio::io_context& io_;
  LaunchPlan plan_;
  std::string program_path_;  ///< ssh's or srun's
  std::string control_dir_;   ///< sockets of the shared ssh connections; empty: none
  Clock& clock_;
  ProcessSpawner& spawner_;
  boost::asio::signal_set signals_;
  std::unique_ptr<Timer> start_timer_;     ///< ready_limit, then the end of a start given up
  std::unique_ptr<Timer> teardown_timer_;  ///< closing the ssh connections, then killing ssh
  std::unique_ptr<Timer> close_timer_;     ///< the time limit of closing shared connections
  std::unique_ptr<Timer> hosts_timer_;     ///< an external daemon: are too few hosts left?
  std::unique_ptr<RendezvousDaemon> daemon_;
  std::vector<std::string> start_problems_;  ///< why hosts are not ready
  size_t starts_left_ = 0;                   ///< hosts neither ready nor ended before the start
  bool starts_timed_out_ = false;
  bool started_ = false;   ///< every host was ready: the tokens went out, the run goes on
  bool aborting_ = false;  ///< nothing starts: waiting for every session to end
  int abort_exit_ = 0;
  bool remote_versions_warned_ = false;
  std::vector<std::unique_ptr<Remote>> hosts_;  ///< every session, hosts started again included
  std::vector<int> exit_codes_;                 ///< each host's, in the order they ended
  size_t hosts_left_ = 0;
  SteadyTime hosts_started_{};
  std::vector<int> rejoins_;  ///< per host: times it was started again (--host-retries)
  std::vector<std::unique_ptr<Timer>> rejoin_timers_;  ///< per host: its next start
  std::vector<bool> returning_;  ///< per host: started again, not yet in a round (our daemon's)
  bool tearing_down_ = false;
  int signals_seen_ = 0;
  int first_signal_ = 0;
  int teardown_exit_ = 0;  ///< tear_down()'s exit code: the launch's, whatever the hosts end with
  std::optional<int> exit_code_;
};

}  // namespace cohort
