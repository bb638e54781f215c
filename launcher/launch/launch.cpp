#include "launcher/launch/launch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>

#include "common/console.hpp"
#include "common/exit_codes.hpp"
#include "common/host_port.hpp"
#include "common/log.hpp"
#include "common/signal_blocking.hpp"
#include "common/signal_names.hpp"
#include "common/stop_signals.hpp"
#include "common/text.hpp"
#include "launcher/tokens/launch_token.hpp"
#include "process/output_pump.hpp"

extern char** environ;

namespace cohort {
namespace {

// What runs a local host's line (Transport::Local), as sshd would run it remotely.
const std::string kLocalShell = "/bin/sh";

struct Pipe {
  int read = -1;
  int write = -1;
};

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {};
  return {fds[0], fds[1]};
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::vector<std::string> own_environment() {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
  return env;
}

std::string last_line(const SpawnedChild& child, SpawnedChild::Stream stream) {
  const std::shared_ptr<OutputPump>& pump = child.pump(stream);
  if (!pump || pump->tail().empty()) return "";
  return pump->tail().back();
}

}  // namespace

Launch::Launch(boost::asio::io_context& io, Clock& clock, ProcessSpawner& spawner, LaunchPlan plan)
    : io_(io),
      plan_(std::move(plan)),
      clock_(clock),
      spawner_(spawner),
      signals_(io),
      start_timer_(clock.make_timer()),
      teardown_timer_(clock.make_timer()),
      close_timer_(clock.make_timer()),
      hosts_timer_(clock.make_timer()) {
  for (int signal : stop_signals_to_take()) signals_.add(signal);  // SIGHUP: not under nohup
}

Launch::~Launch() = default;

int Launch::run() {
  ::signal(SIGPIPE, SIG_IGN);
  const char* path = std::getenv("PATH");
  const std::string& program = srun()    ? plan_.srun.program
                               : local() ? kLocalShell
                                         : plan_.ssh.program;
  program_path_ = find_executable(program, path ? path : "");
  if (program_path_.empty()) {
    std::cerr << "cohort launch: no '" << program << "' in PATH\n";
    return kExitNotFound;
  }
  if (ssh() && !user_controls_sharing(plan_.ssh.options)) share_connections();
  arm_signals();
  if (start_daemon()) start_every_host();
  io_.run();
  block_signals_until_exit();  // the exit code is decided: a late signal must not replace it
  // Without throwing: a master ssh may unlink its socket while the directory is being removed.
  std::error_code ignored;
  if (!control_dir_.empty()) std::filesystem::remove_all(control_dir_, ignored);
  return exit_code_.value_or(kExitInternal);
}

bool Launch::spawn(Remote& remote, const std::string& remote_line, const PumpTarget& out,
                   const PumpTarget& err, SshRole role) {
  Pipe in = make_pipe();
  SpawnRequest request;
  request.executable = program_path_;
  std::vector<std::string> argv =
      srun()    ? srun_argv(plan_.srun, remote.name, plan_.hosts[remote.index].slots, remote_line)
      : local() ? std::vector<std::string>{kLocalShell, "-c", remote_line}
                : ssh_argv(plan_.ssh, remote.name, remote_line, role);
  request.args.assign(argv.begin() + 1, argv.end());
  request.env = own_environment();
  request.stdin_fd = remote.child.for_child(in.read);
  request.stdout_fd = remote.child.pipe_to(SpawnedChild::Stream::Out, out);
  request.stderr_fd = remote.child.pipe_to(SpawnedChild::Stream::Err, err);
  SpawnedChild::Events events{[this, &remote](ExitStatus) { maybe_ended(remote); },
                              [this, &remote] { maybe_ended(remote); }};
  std::error_code error;
  bool piped = in.read >= 0 && request.stdout_fd >= 0 && request.stderr_fd >= 0;
  if (!piped || !remote.child.spawn(spawner_, request, std::move(events), error)) {
    close_fd(in.write);
    std::cerr << "cohort launch: cannot start " << transport_name() << " for " << remote.name
              << ": " << (error ? error.message() : "no pipes") << "\n";
    return false;
  }
  remote.stdin_fd = in.write;
  return true;
}

void Launch::maybe_ended(Remote& remote) {
  if (!remote.child.ended()) return;
  close_fd(remote.stdin_fd);
  if (started_) return on_host_ended(remote);
  on_start_ended(remote);
}

bool Launch::start_daemon() {
  if (!plan_.rdzv_endpoint.empty()) return true;
  daemon_ = std::make_unique<RendezvousDaemon>(io_, clock_, plan_.daemon);
  if (auto error = daemon_->start()) {
    std::cerr << "cohort launch: "
              << start_failure_text(daemon_->failed_listener(), plan_.daemon, error,
                                    "cannot host the rendezvous on")
              << "\n";
    finish(kExitRendezvous);
    return false;
  }
  daemon_->on_event = [this](const Event& event) { say_who_is_back(event); };
  if (plan_.daemon.http_port >= 0) {  // one write, through the console: never torn by log lines
    console::write_message(
        STDERR_FILENO, cat("cohort launch: /metrics and the timeline pages on http://",
                           host_port_text(plan_.daemon.http_address, daemon_->http_port()), "/\n"));
  }
  return true;
}

std::string Launch::endpoint() const {
  if (!plan_.rdzv_endpoint.empty()) return plan_.rdzv_endpoint;
  return host_port_text(plan_.rdzv_host, daemon_->port());
}

// Every host at once: its agent's ssh session (or srun step) starts, and the agent says it is
// ready, then waits for the run's token, which goes to every host only once all of them are
// ready: each one answered, logged us in without a prompt and has cohort where the plan says.
// Should one not be ready within ready_limit, nothing starts (the agents end without a token).
void Launch::start_every_host() {
  starts_left_ = plan_.hosts.size();
  rejoins_.assign(plan_.hosts.size(), 0);
  returning_.assign(plan_.hosts.size(), false);
  for (size_t i = 0; i < plan_.hosts.size(); ++i) {
    rejoin_timers_.push_back(clock_.make_timer());
    if (!start_host(i, {})) return finish(kExitInternal);
  }
  start_timer_->start_after(ready_limit(plan_), [this] {
    starts_timed_out_ = true;
    for (auto& remote : hosts_) {
      if (!remote->ready) give_up(*remote);
    }
  });
}

// Starts host `index`'s agent (`launched_ago`: a lost host started again, the job's age); false
// when its ssh (or srun) could not be started. Before the run starts, its lines wait for the
// start and its token for every host's ready line; a host started again gets its token at once.
bool Launch::start_host(size_t index, std::chrono::milliseconds launched_ago) {
  auto remote = std::make_unique<Remote>(io_);
  remote->index = index;
  remote->name = plan_.hosts[index].name;
  remote->started = clock_.now();
  std::string address = plan_.hosts[index].address();
  PumpTarget out{STDOUT_FILENO, -1, "[" + address + "]: ", "[" + address + ":"};
  PumpTarget err{STDERR_FILENO, -1, "[" + address + "]: ", "[" + address + ":"};
  out.held = err.held = !started_;
  out.ready_prefix = std::string(kReadyPrefix);
  out.on_ready = [this, &host = *remote](std::string_view version) { on_ready(host, version); };
  std::string line = remote_shell_line(remote_command(plan_, index, endpoint(), launched_ago));
  log::debug(remote->name, ": ", line);
  Remote& started = *remote;
  hosts_.push_back(std::move(remote));
  // The first session of a host opens the connection that later ones share.
  if (!spawn(started, line, out, err, started_ ? SshRole::Client : SshRole::Master)) {
    if (!started_) return false;
    exit_codes_.push_back(kSshFailed);
    if (--hosts_left_ > 0) return true;
    finish(launch_exit_code(exit_codes_));
    return false;
  }
  // The agent's first line: the token, on no command line. A fresh pipe takes it at once.
  if (started_) write_all(started.stdin_fd, handshake_lines());
  return true;
}

void Launch::on_ready(Remote& remote, std::string_view version) {
  if (!started_ && (starts_timed_out_ || tearing_down_)) return;  // given up: it is ending
  remote.ready = true;
  log::debug(remote.name, ": ", version);
  if (version != plan_.own_version && !remote_versions_warned_) {
    remote_versions_warned_ = true;
    log::warn(remote.name, " runs ", version, " (this is ", plan_.own_version,
              "): every host should run the same cohort");
  }
  if (started_) return;
  --starts_left_;
  start_when_ready();
}

// A host's session ended before the run started: before its ready line, why it is not ready.
void Launch::on_start_ended(Remote& remote) {
  if (!remote.ready) {
    --starts_left_;
    remote.ready = true;  // counted
    start_problems_.push_back(start_problem(remote));
  } else if (!tearing_down_ && !aborting_) {
    start_problems_.push_back(cat(remote.name, ": its agent ended before the run started (",
                                  transport_name(), " ", remote.child.status()->describe(), ")"));
  }
  if (aborting_) {
    if (std::all_of(hosts_.begin(), hosts_.end(), [](auto& host) { return host->child.ended(); }))
      finish(abort_exit_);
    return;
  }
  start_when_ready();
}

std::string Launch::start_problem(const Remote& remote) const {
  const ExitStatus& status = *remote.child.status();
  int code = status.shell_code();
  std::string why = last_line(remote.child, SpawnedChild::Stream::Err);
  if (starts_timed_out_ && status.signaled) {
    return cat(remote.name, ": its agent was not ready within ", ready_limit(plan_).count(),
               " s (no answer, or a cohort other than this version that never says it is)");
  }
  if (code == kSshFailed && ssh()) {
    bool this_machine = is_loopback_host(plan_.hosts[remote.index].address());
    return cat(remote.name, ": unreachable (", why.empty() ? "ssh failed" : why, ")",
               this_machine ? "; cohort launch reaches every host over ssh, this "
                              "machine too: for it alone, -H localhost (without --launcher ssh) "
                              "needs no ssh, nor does cohort run --standalone"
                            : "");
  }
  bool cohorts_own = why.rfind("cohort run: ", 0) == 0;  // else the shell's, or env's
  if ((code == 127 || code == 126) && !cohorts_own) {
    return cat(remote.name, ": no cohort at '", plan_.remote_cohort, "' (set --remote-cohort)");
  }
  return cat(remote.name, ": '", plan_.remote_cohort, " run' ended with ", status.describe(),
             why.empty() ? "" : ": " + why);
}

// Once every host is ready (or will never be): the run starts, or nothing does.
void Launch::start_when_ready() {
  if (starts_left_ > 0) return;
  start_timer_->cancel();
  if (tearing_down_) return abort_start(128 + first_signal_);
  if (!start_problems_.empty()) {
    for (const auto& problem : start_problems_) std::cerr << "cohort launch: " << problem << "\n";
    std::cerr << "cohort launch: nothing was started\n";
    if (plan_.scheduler == "Slurm" && any_unreachable()) {
      std::cerr << "cohort launch: ssh into a Slurm job's nodes needs pam_slurm_adopt on them; "
                   "without it, start them as the job's steps: --launcher srun (the default "
                   "inside a Slurm job whose srun is in PATH)\n";
    }
    return abort_start(kExitUnreachable);
  }
  started_ = true;
  log::info("rendezvous at ", endpoint(), ", run id ", plan_.run_id, ", ", plan_.hosts.size(),
            " hosts from ", plan_.hosts_source, ", ",
            plan_.token.empty() ? "no token"
            : local()           ? "token passed on the agent's input"
                                : "token sent over " + transport_name());
  log::info("variables set on every host: ", forwarded_names(plan_));
  warn_about_threads();
  hosts_left_ = hosts_.size();
  hosts_started_ = clock_.now();
  for (auto& remote : hosts_) {
    remote->child.release_held_output();
    write_all(remote->stdin_fd, handshake_lines());
  }
}

std::string Launch::handshake_lines() const {
  return token_line(plan_.token) + secrets_line(secret_env(plan_));
}

bool Launch::any_unreachable() const {
  return std::any_of(hosts_.begin(), hosts_.end(), [](const auto& remote) {
    return remote->child.status() && remote->child.status()->shell_code() == kSshFailed;
  });
}

// Nothing starts: every agent's stdin closes before its token (it ends at once), its lines are
// dropped, and the launch ends with `exit_code` once every session has (its ssh is killed after
// 5 s).
void Launch::abort_start(int exit_code) {
  aborting_ = true;
  abort_exit_ = exit_code;
  for (auto& remote : hosts_) {
    remote->child.drop_held_output();
    close_fd(remote->stdin_fd);
  }
  if (std::all_of(hosts_.begin(), hosts_.end(), [](auto& host) { return host->child.ended(); }))
    return finish(exit_code);
  start_timer_->start_after(std::chrono::seconds(5), [this] {
    for (auto& remote : hosts_) give_up(*remote);
  });
}

// A host lost while the run goes on without it (enough hosts are left) is started again after
// a pause, --host-retries times at most: its agent joins the next round (a scale-up). Never once
// the run has ended: a fresh agent would open a new run under the same id.
void Launch::rejoin_later(size_t index) {
  if (tearing_down_ || exit_code_) return;
  if (rejoins_[index] >= plan_.host_retries) {
    if (plan_.host_retries > 0) {
      log::warn(plan_.hosts[index].name, ": not started again (--host-retries ", plan_.host_retries,
                " used)");
    }
    return;
  }
  int attempt = ++rejoins_[index];
  std::chrono::seconds pause = rejoin_pause(attempt);
  log::warn(plan_.hosts[index].name, ": starting its agent again in ", pause.count(), " s (",
            attempt, " of ", plan_.host_retries, ", --host-retries)");
  rejoin_timers_[index]->start_after(pause, [this, index] {
    if (tearing_down_ || exit_code_ || hosts_left_ == 0) return;
    if (daemon_ && !daemon_->runs_going()) return;
    auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now() - hosts_started_);
    ++hosts_left_;
    returning_[index] = true;
    start_host(index, std::max(ago, std::chrono::milliseconds(1)));
  });
}

// A host started again is back once a round of the launch's own daemon takes its agent in: the
// others' "scale-up" says that someone came, this says who.
void Launch::say_who_is_back(const Event& event) {
  if (event.name != "round.started") return;
  const nlohmann::json& members = event.fields.value("members", nlohmann::json::array());
  for (size_t i = 0; i < returning_.size(); ++i) {
    if (!returning_[i]) continue;
    for (const nlohmann::json& member : members) {
      if (member.value("address", "") != plan_.hosts[i].address()) continue;
      returning_[i] = false;
      log::warn(plan_.hosts[i].name, ": back in the run (round ", event.fields.value("round", 0),
                ", a world of ", event.fields.value("world_size", 0), ")");
      break;
    }
  }
}

// The agents' OMP_NUM_THREADS warning, once for all hosts.
void Launch::warn_about_threads() const {
  if (plan_.env.count("OMP_NUM_THREADS")) return;
  bool several = !plan_.nproc_per_node.empty() && plan_.nproc_per_node != "1";
  for (const HostSlots& host : plan_.hosts) several = several || host.workers() > 1;
  if (several) {
    log::warn(
        "setting OMP_NUM_THREADS=1 for each worker to avoid overloading the system; set "
        "it yourself (-x OMP_NUM_THREADS=N) to tune performance");
  }
}

void Launch::on_host_ended(Remote& remote) {
  // ssh killed by a signal (not by us) is a connection gone too; a local agent's signal is its own.
  const ExitStatus& status = *remote.child.status();
  int code = local() ? status.shell_code() : status.signaled ? kSshFailed : status.code;
  exit_codes_.push_back(code);
  --hosts_left_;
  if (code == kSshFailed && ssh() && !tearing_down_) {
    std::string why = last_line(remote.child, SpawnedChild::Stream::Err);
    log::warn(remote.name, ": lost (ssh exited 255", why.empty() ? "" : ": " + why, ")");
    check_hosts_left(remote.name, " was lost", true);
    auto ran_for =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now() - remote.started);
    rejoins_[remote.index] = host_retries_used(rejoins_[remote.index], ran_for);
    if (hosts_left_ > 0) rejoin_later(remote.index);
  } else if (code != 0 && !tearing_down_) {
    log::warn(remote.name, ": cohort run ended with ", status.describe());
    check_hosts_left(remote.name, " ended (" + status.describe() + ")", false);
  } else {
    log::info(remote.name, ": ended with ", status.describe());
  }
  if (hosts_left_ > 0) return;
  hosts_timer_->cancel();
  for (auto& timer : rejoin_timers_) timer->cancel();
  // The agents that were told to stop end with 129 (their connection closed) or the stop's code.
  if (teardown_exit_ != 0) return finish(teardown_exit_);
  finish(launch_exit_code(exit_codes_));
}

// Under a launch no host comes back: a host that left a run that goes on (lost, or its agent
// stopped or killed) with fewer than --nnodes' minimum left would keep the others waiting for
// it until their join timeout, so every host is stopped. A host's agent that ended with the
// run's own code is no such host: the run has ended (its own daemon says so at once; with an
// external cohortd, the other hosts end too within the shutdown timeout).
void Launch::check_hosts_left(const std::string& host, const std::string& how, bool lost) {
  int left = static_cast<int>(hosts_left_);
  if (left == 0 || left >= plan_.min_nodes) return;
  std::string reason = cat(host, how, " and ", left, " hosts are left; --nnodes ", plan_.nnodes,
                           " needs ", plan_.min_nodes);
  // Not ended is also not begun: a host may end before any other joined.
  if (lost || (daemon_ && !daemon_->run_ended(plan_.run_id)))
    return tear_down(kExitUnreachable, reason);
  if (daemon_) return;  // the run has ended: its hosts are ending
  hosts_timer_->start_after(plan_.shutdown_timeout + std::chrono::seconds(5), [this, reason] {
    if (!tearing_down_ && hosts_left_ > 0) tear_down(kExitUnreachable, reason);
  });
}

void Launch::arm_signals() {
  signals_.async_wait([this](const boost::system::error_code& error, int signal) {
    if (error) return;
    on_signal(signal);
    arm_signals();
  });
}

// First signal: the run is stopped through the rendezvous (every worker gets SIGTERM and the
// shutdown timeout); second: every ssh connection is closed (the agents stop at once); third:
// ssh itself is killed.
void Launch::on_signal(int signal) {
  ++signals_seen_;
  if (signals_seen_ == 1) {
    first_signal_ = signal;
    if (!started_) {  // the hosts are not all ready: nothing starts
      tearing_down_ = true;
      for (auto& remote : hosts_) give_up(*remote);
      return;
    }
    return tear_down(128 + signal, "stopped by " + signal_name(signal) + " on the launching host");
  }
  if (signals_seen_ == 2) {
    log::warn("received ", signal_name(signal), " again: closing every ",
              srun()    ? "srun's input"
              : local() ? "agent's input"
                        : "ssh connection");
    return close_stdins();
  }
  log::warn("received ", signal_name(signal), " again: ",
            srun()    ? "ending every srun step"
            : local() ? "ending every agent"
                      : "killing ssh");
  kill_all(hosts_);
}

void Launch::tear_down(int exit_status, const std::string& reason) {
  if (tearing_down_) return;
  tearing_down_ = true;
  teardown_exit_ = exit_status;
  for (auto& timer : rejoin_timers_) timer->cancel();
  log::warn(reason, ": stopping every host");
  if (daemon_) {
    daemon_->cancel_runs(exit_status, reason);
  } else {
    close_stdins();
  }
  // Should an agent not hear the daemon, its connection closes once the workers had their
  // shutdown timeout; should ssh still not end, it is killed.
  teardown_timer_->start_after(plan_.shutdown_timeout + std::chrono::seconds(5), [this] {
    close_stdins();
    teardown_timer_->start_after(std::chrono::seconds(5), [this] { kill_all(hosts_); });
  });
}

void Launch::close_stdins() {
  for (auto& remote : hosts_) close_fd(remote->stdin_fd);
}

// ssh is killed (its connection closes, and the agent stops as on SIGHUP); srun gets SIGTERM, on
// which it has Slurm kill every process of its step, then ends; a local agent gets SIGTERM (a
// second one ends its workers at once).
void Launch::kill_all(std::vector<std::unique_ptr<Remote>>& remotes) {
  for (auto& remote : remotes) kill(*remote);
}

void Launch::kill(Remote& remote) {
  if (remote.child.pid() > 0 && !remote.child.status())
    spawner_.signal_process(remote.child.pid(), ssh() ? SIGKILL : SIGTERM);
}

// Before the start: its ssh is killed and its lines no longer awaited. A shared connection's
// master may hold the session's pipes until the remote command ends, which one that hangs (a cd
// into a dead network mount) never does; `ssh -O exit` ends the master with the launch.
void Launch::give_up(Remote& remote) {
  kill(remote);
  remote.child.close_pumps();
}

bool Launch::srun() const { return plan_.transport == Transport::Srun; }

bool Launch::ssh() const { return plan_.transport == Transport::Ssh; }

bool Launch::local() const { return plan_.transport == Transport::Local; }

std::string Launch::transport_name() const { return srun() ? "srun" : local() ? "sh" : "ssh"; }

void Launch::share_connections() {
  char pattern[] = "/tmp/cohort-ssh-XXXXXX";  // short: a socket path has at most 107 bytes
  if (::mkdtemp(pattern) == nullptr) return log::info("no ssh connection sharing: ", pattern);
  control_dir_ = pattern;
  plan_.ssh.control_path = control_dir_ + "/%C";
}

// The shared connections end with the launch (`ssh -O exit`, at most 3 s).
void Launch::close_shared_connections(std::function<void()> done) {
  if (control_dir_.empty() || hosts_.empty()) return done();
  auto left = std::make_shared<size_t>(0);
  auto finish_once = std::make_shared<std::function<void()>>(std::move(done));
  auto one_done = [left, finish_once, this] {
    if (*left > 0 && --*left > 0) return;
    close_timer_->cancel();
    if (auto call = std::move(*finish_once)) call();
  };
  std::set<std::string> names;
  for (const auto& host : hosts_) names.insert(host->name);
  for (const std::string& name : names) {
    SpawnRequest request;
    std::vector<std::string> argv = ssh_close_master_argv(plan_.ssh, name);
    request.executable = program_path_;
    request.args.assign(argv.begin() + 1, argv.end());
    request.env = own_environment();
    request.stdout_fd = request.stderr_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    std::error_code error;
    pid_t pid = spawner_.spawn(
        request, [one_done](ExitStatus) { one_done(); }, error);
    ::close(request.stdout_fd);
    if (pid >= 0) ++*left;
  }
  if (*left == 0) return one_done();
  close_timer_->start_after(std::chrono::seconds(3), [one_done, left] {
    *left = 0;
    one_done();
  });
}

void Launch::finish(int exit_code) {
  if (exit_code_) return;
  exit_code_ = exit_code;
  start_timer_->cancel();
  teardown_timer_->cancel();
  signals_.cancel();
  if (daemon_) daemon_->stop();
  close_shared_connections([this] { io_.stop(); });
}

}  // namespace cohort
