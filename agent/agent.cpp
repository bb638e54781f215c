#include "agent/agent.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/post.hpp>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <random>

#include "agent/agent_events.hpp"
#include "agent/collective_report.hpp"
#include "agent/earlier_agent.hpp"
#include "agent/error_file.hpp"
#include "agent/failure_summary.hpp"
#include "common/console.hpp"
#include "common/exit_codes.hpp"
#include "common/free_port.hpp"
#include "common/host_port.hpp"
#include "common/install_layout.hpp"
#include "common/log.hpp"
#include "common/signal_blocking.hpp"
#include "common/signal_names.hpp"
#include "common/stop_signals.hpp"

extern char** environ;

namespace cohort {
namespace {

std::string random_suffix() { return std::to_string(random_u64() % 100000); }

agent::Settings machine_settings(const AgentConfig& config) {
  return {config.entrypoint_name,  config.host_name,
          config.env.run_id,       config.under_launch,
          config.shutdown_timeout, config.absorbed_signals,
          config.crash_loop,       config.rendezvous.refused_token_hint};
}

std::string temp_directory() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

// Where the cohort_heartbeat Python module is (share/cohort/python beside bin/), if it is there;
// looked for once.
const std::string& python_helper_dir() {
  static const std::string dir = installed_python_module_dir();
  return dir;
}

// Stops this process as SIGTSTP's default action would (the shell says "Stopped"), and returns
// once it continues. The kernel discards it in an orphaned process group: then it returns at once.
void stop_as_by_terminal() {
  struct sigaction by_default = {};
  struct sigaction taken = {};
  by_default.sa_handler = SIG_DFL;
  ::sigaction(SIGTSTP, &by_default, &taken);
  ::raise(SIGTSTP);
  ::sigaction(SIGTSTP, &taken, nullptr);
}

bool forwards(const std::vector<int>& forwarded, int signal) {
  return std::find(forwarded.begin(), forwarded.end(), signal) != forwarded.end();
}

bool is_python(const std::string& executable) {
  return std::filesystem::path(executable).filename().string().rfind("python", 0) == 0;
}

// How often the workers' progress goes to the daemon: often enough, against the hang timeout,
// that the rank that went silent first is known across nodes, and never more than 5 times a
// second nor less than once a second.
std::chrono::milliseconds progress_interval(const HangSettings& hang) {
  constexpr std::chrono::milliseconds kLongest{1000}, kShortest{200};
  if (!hang.enabled()) return kLongest;
  auto eighth = std::chrono::duration_cast<std::chrono::milliseconds>(hang.timeout / 8);
  return std::clamp(eighth, kShortest, kLongest);
}

RoundInfo round_info(const proto::RoundAssigned& assigned, bool rank0_store) {
  RoundInfo round;
  round.round = assigned.round;
  round.group_rank = assigned.group_rank;
  round.group_world_size = assigned.group_world_size;
  round.base_rank = assigned.base_rank;
  round.world_size = assigned.world_size;
  round.master_addr = assigned.master_addr;
  round.master_port = assigned.master_port;
  round.use_agent_store = !rank0_store;
  return round;
}

}  // namespace

Agent::Agent(boost::asio::io_context& io, AgentConfig config)
    : io_(io),
      config_(std::move(config)),
      agent_env_(parse_environ(environ)),
      state_(machine_settings(config_)),
      reaper_(io),
      logs_(config_.log_dir, config_.env.run_id),
      signals_(io),
      reconnect_timer_(io) {
  for (int signal : stop_signals_to_take()) signals_.add(signal);  // SIGHUP: not under nohup
  for (int signal : config_.extra_signals) signals_.add(signal);
  for (int signal : config_.absorbed_signals) signals_.add(signal);
  // Ctrl-Z pauses the agent and its workers, unless SIGTSTP was ignored when cohort started (as
  // a shell without job control may leave it): then it stays ignored, workers included.
  if (!signal_ignored(SIGTSTP)) signals_.add(SIGTSTP);
  node_base_id_ = cat(config_.rendezvous.address, ":", ::getpid(), ":", random_suffix());
  hosts_rendezvous_ = config_.hosts_rendezvous;
  if (hosts_rendezvous_) hosted_endpoints_.insert(config_.rendezvous.first_endpoint);
  if (config_.hang.enabled()) {  // a hung native worker's stacks, when elfutils is installed
    auto path = agent_env_.find("PATH");
    stack_tool_ = find_executable("eu-stack", path == agent_env_.end() ? "" : path->second);
  }
  if (config_.health.enabled()) {
    health_ =
        std::make_unique<HealthCheck>(io_, spawner_, config_.health, merge_env(agent_env_, {}));
  }
  if (config_.gpu_health.enabled())
    gpu_health_ = std::make_unique<GpuHealthCheck>(io_, clock_, config_.gpu_health);
  if (!config_.python_worker) config_.env.torch_major = 2;  // --no-python: as PyTorch 2.x
}

// A Python worker's torch version decides the names of NCCL's variables: read once, while the
// agent reaches the rendezvous; the first round's workers wait for it (TorchProbe::kTimeout at
// most).
void Agent::start_torch_probe() {
  if (!config_.python_worker) return;
  torch_probe_ = std::make_unique<TorchProbe>(clock_, spawner_);
  if (!torch_probe_->start(config_.executable, merge_env(agent_env_, {}))) torch_probe_.reset();
}

Agent::~Agent() = default;

void Agent::event(const Event& event) {
  if (events_.writes()) events_.record(event, wall_clock_ms());
}

// Runs the GPU checks and then the health command, those there are, then `proceed`; unhealthy_
// says why the node is not healthy ("" when it is).
void Agent::check_health(std::function<void()> proceed) {
  if (!health_ && !gpu_health_) return proceed();
  auto run_command = [this, proceed](const std::string& gpu_problem) {
    if (exit_code_) return;
    if (!gpu_problem.empty() || !health_) return health_checked(gpu_problem, proceed);
    health_->run([this, proceed](const std::string& problem) { health_checked(problem, proceed); });
  };
  if (!gpu_health_) return run_command("");
  gpu_health_->run(group_ ? group_->pids() : std::vector<pid_t>(), run_command);
}

void Agent::health_checked(const std::string& problem, const std::function<void()>& proceed) {
  if (exit_code_ || state_.end_decided()) return;
  if (!problem.empty()) {  // said once per reason, then at info level
    log::write(problem == unhealthy_ ? log::Level::Info : log::Level::Warn,
               cat(problem, "; this node does not join a round until a check passes (again in ",
                   config_.health.interval.count() / 1000.0, " s)"));
  } else if (!unhealthy_.empty()) {
    log::warn("the health check passed: this node joins the next round");
  }
  unhealthy_ = problem;
  if (problem.empty()) {
    unhealthy_since_.reset();
  } else if (!unhealthy_since_) {
    unhealthy_since_ = clock_.now();
  } else if (clock_.now() - *unhealthy_since_ >=
             std::chrono::milliseconds(config_.rendezvous.config.join_timeout_ms)) {
    return perform(state_.stayed_unhealthy(cat("this node stayed unhealthy for the join timeout (",
                                               config_.rendezvous.config.join_timeout_ms / 1000.0,
                                               " s): ", problem)));
  }
  proceed();
}

// On the current connection: `join` when healthy, else tell the daemon why not and check again.
void Agent::join_if_healthy() {
  if (!client_) return;
  if (unhealthy_.empty()) return client_->send(proto::Join{rank0_port()});
  client_->send(proto::Unhealthy{unhealthy_});
  recheck_health_later();
}

void Agent::recheck_health_later() {
  health_retry_.expires_after(config_.health.interval);
  health_retry_.async_wait([this](const boost::system::error_code& error) {
    if (!error && !exit_code_ && !state_.end_decided()) check_health([this] { join_if_healthy(); });
  });
}

agent_events::Source Agent::event_source() const {
  return {config_.env.run_id, node_base_id_, config_.host_name};
}

// --redirects or --tee without --log-dir: torchrun leaves the files in its temporary directory,
// and so does cohort, which says where they are (torchrun only at info level).
void Agent::keep_asked_files() {
  if (!logs_.temporary() || logs_.run_dir().empty()) return;
  if (!writes_worker_files(config_.output, config_.nproc)) return;
  logs_.keep();
  std::string notice = cat("the workers' output files are in ", logs_.run_dir(),
                           " (kept after the run; --log-dir chooses where)");
  config_.under_launch ? log::info(notice) : log::warn(notice);
}

int Agent::run() {
  // A lost host that cohort launch starts again: the agent it lost may still run here, with its
  // workers; it goes first (earlier_agent.hpp). The first start of a host carries no launch age.
  if (config_.under_launch && config_.launch_age.count() > 0)
    stop_earlier_agents(config_.shutdown_timeout + std::chrono::seconds(5));
  // NVML loads and reads on a thread while the agent starts its keeper and connects: the first
  // reading (tens of ms on a GPU node) is the longest step of a launch. The keeper's start is a
  // vfork and exec, which copies nothing of a thread that is inside the driver.
  if (gpu_health_) gpu_health_->read_ahead();
  keep_asked_files();
  // Ticks once a second; silent for the heartbeat timeout (a stopped agent), the keeper kills.
  auto stale_limit = std::chrono::milliseconds(config_.rendezvous.config.heartbeat_timeout_ms);
  if (!keeper_.start(stale_limit)) {
    log::warn("cannot start the process-group keeper: ", std::strerror(errno));
  } else if (logs_.temporary()) {
    keeper_.remove_when_orphaned(logs_.base_dir());  // an agent killed by SIGKILL leaves none
  }
  if (logs_.enabled() && !logs_.run_dir().empty())
    log::info("log directory set to: ", logs_.run_dir());  // torchrun's words
  ::signal(SIGPIPE, SIG_IGN);
  if (config_.nproc > 1 && config_.bindings.empty() && agent_env_.count("OMP_NUM_THREADS") == 0) {
    std::string warning =
        "setting OMP_NUM_THREADS=1 for each worker to avoid overloading the system; set it "
        "yourself to tune performance";
    config_.under_launch ? log::info(warning) : log::warn(warning);  // the launcher says it once
  }
  arm_signals();
  start_file_timer();
  if (config_.under_launch) watch_stdin();
  events_.echo_to_stderr(config_.console_events);
  if (!config_.event_log.empty()) {
    if (std::string problem = events_.open(config_.event_log); !problem.empty())
      log::warn("--event-log ", problem, ": this agent's events are not recorded");
  }
  event(agent_events::agent_started(event_source(), config_.nproc,
                                    cat(config_.rendezvous.host, ":", config_.rendezvous.port)));
  start_torch_probe();
  perform(state_.start());
  watch_endpoints();
  io_.run();
  // The end is decided and the workers are gone: a signal from now on has nothing to stop, and
  // must not turn the decided exit code into a death by signal once signals_ is destroyed.
  block_signals_until_exit();
  return exit_code_.value_or(kExitInternal);
}

void Agent::perform(agent::Actions actions) {
  for (const agent::Action& action : actions) {
    if (exit_code_) return;  // an action before this one ended the agent
    perform(action);
  }
}

void Agent::perform(const agent::Action& action) {
  std::visit(
      [this](const auto& typed) {
        using T = std::decay_t<decltype(typed)>;
        if constexpr (std::is_same_v<T, agent::Connect>) {
          check_health([this] {
            connect();
            if (!unhealthy_.empty()) recheck_health_later();
          });
        } else if constexpr (std::is_same_v<T, agent::ReconnectAfter>) {
          reconnect_after(typed.delay);
        } else if constexpr (std::is_same_v<T, agent::SendJoin>) {
          check_health([this] { join_if_healthy(); });
        } else if constexpr (std::is_same_v<T, agent::ReportSuccess>) {
          client_->send(proto::NodeSucceeded{typed.round});
        } else if constexpr (std::is_same_v<T, agent::ReportFailure>) {
          report_failure(typed);
        } else if constexpr (std::is_same_v<T, agent::Leave>) {
          // No client yet while the first health check runs: nothing to leave.
          if (client_) client_->close(proto::Leave{typed.reason});
        } else if constexpr (std::is_same_v<T, agent::Disconnect>) {
          if (client_) client_->close();
        } else if constexpr (std::is_same_v<T, agent::StartGroup>) {
          event(agent_events::workers_started(event_source(), typed.round, config_.nproc));
          start_group_after_probe(typed.round);
        } else if constexpr (std::is_same_v<T, agent::StopGroup>) {
          if (pending_round_) return drop_pending_start();
          if (group_ && !group_->stopping()) group_->stop(typed.signal);
        } else if constexpr (std::is_same_v<T, agent::KillGroup>) {
          if (pending_round_) return drop_pending_start();
          if (group_) group_->stop(SIGKILL);
        } else if constexpr (std::is_same_v<T, agent::ForwardSignal>) {
          if (group_) group_->forward_signal(typed.signal);
        } else if constexpr (std::is_same_v<T, agent::Say>) {
          if (log::enabled(typed.level)) log::write(typed.level, typed.text);
        } else if constexpr (std::is_same_v<T, agent::ShowProgress>) {
          if (log::enabled(typed.level)) console::write_message(STDERR_FILENO, typed.line);
        } else if constexpr (std::is_same_v<T, agent::PrintSummary>) {
          // Quotes workers' stderr, and other nodes' summaries come through the daemon.
          console::write_message(STDERR_FILENO, std::string(kChildFailedLine) + "\n" +
                                                    escape_for_terminal(typed.summary));
        } else if constexpr (std::is_same_v<T, agent::Exit>) {
          finish(typed.code);
        }
      },
      action);
}

// torchrun's FileTimer server, when TORCHELASTIC_ENABLE_FILE_TIMER=1: the pipe is at
// TORCHELASTIC_TIMER_FILE if set, else a fresh path in $TMPDIR (workers get it either way).
void Agent::start_file_timer() {
  auto enabled = agent_env_.find("TORCHELASTIC_ENABLE_FILE_TIMER");
  if (enabled == agent_env_.end() || enabled->second != "1") return;
  std::string path =
      agent_env_.count("TORCHELASTIC_TIMER_FILE")
          ? agent_env_["TORCHELASTIC_TIMER_FILE"]
          : cat(temp_directory(), "/watchdog_timer_", ::getpid(), "_", random_suffix());
  file_timer_ = std::make_unique<FileTimerServer>(
      io_, path, [this](const ExpiredTimer& expired) { on_timer_expired(expired); },
      [this](pid_t pid) { return group_ && group_->runs(pid); });
  if (std::string error = file_timer_->start(); !error.empty()) {
    log::warn(error, ": FileTimer requests are not served");
    file_timer_.reset();
    return;
  }
  agent_env_["TORCHELASTIC_TIMER_FILE"] = path;  // what every worker inherits
  log::info("serving FileTimer requests at ", path);
}

void Agent::on_timer_expired(const ExpiredTimer& expired) {
  std::string why = cat("FileTimer scope '", expired.scope, "' expired; killed with ",
                        signal_name(expired.signal));
  if (group_ && group_->expire_timer(expired.pid, expired.signal, why)) {
    log::warn("worker pid=", expired.pid, ": ", why);
    return;
  }
  log::warn("FileTimer scope '", expired.scope, "' of pid ", expired.pid,
            " expired, but that pid is not a worker of this node: left alone");
}

void Agent::arm_signals() {
  signals_.async_wait([this](const boost::system::error_code& error, int signal) {
    if (error) return;
    if (signal == SIGTSTP && !forwards(config_.extra_signals, SIGTSTP)) {
      pause_until_continued();
    } else {
      perform(state_.signal(signal, std::chrono::steady_clock::now()));
    }
    arm_signals();
  });
}

// Ctrl-Z: the workers, in process groups of their own that the terminal does not reach, stop
// with the agent, and the keeper hears that the silence to come is a pause. After SIGCONT (fg,
// bg) they continue, and nothing here that measures time counts the pause: the heartbeat to the
// rendezvous, an embedded daemon's heartbeat timeouts, the hang and FileTimer deadlines.
void Agent::pause_until_continued() {
  keeper_.pause();
  if (group_) group_->pause();
  log::info("SIGTSTP: stopped, and the workers with it; fg (or SIGCONT) continues");
  console::drain(std::chrono::milliseconds(100));  // the line above, before the terminal's prompt
  SteadyTime stopped_at = clock_.now();
  stop_as_by_terminal();  // returns once continued
  SteadyDuration paused = clock_.now() - stopped_at;
  keeper_.continue_ticking();
  if (config_.after_pause) config_.after_pause();
  if (client_) client_->continue_after_pause();
  if (file_timer_) file_timer_->postpone(paused);
  if (group_) group_->continue_after_pause(paused);
  log::info("continued after ",
            format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(paused)));
}

void Agent::watch_stdin() {
  if (!stdin_) {
    int fd = ::dup(STDIN_FILENO);
    if (fd < 0) return log::warn("--under-launch: no stdin to watch");
    stdin_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, fd);
  }
  auto buffer = std::make_shared<std::array<char, 256>>();
  stdin_->async_read_some(
      boost::asio::buffer(*buffer), [this, buffer](const boost::system::error_code& error, size_t) {
        if (error == boost::asio::error::operation_aborted) return;
        if (!error) return watch_stdin();  // the launcher never writes; ignore whatever comes
        perform(state_.stdin_closed(std::chrono::steady_clock::now()));
      });
}

int Agent::rank0_port() const {
  if (!config_.rendezvous.rank0_store) return 0;
  return pick_free_port(config_.rendezvous.address.empty() ? "0.0.0.0"
                                                           : config_.rendezvous.address);
}

// One attempt's hello, built when the daemon asks for it: a daemon that restarts hears the
// outcome (and the health) this node has reached by then, not the one when the agent began
// reconnecting.
proto::Hello Agent::make_hello(const std::string& node_id) {
  proto::Hello hello;
  hello.run_id = config_.env.run_id;
  hello.node_id = node_id;
  hello.address = config_.rendezvous.address;
  hello.unhealthy = unhealthy_;
  hello.local_world_size = config_.nproc;
  hello.rank_hint = config_.rendezvous.rank_hint;
  hello.last_round = state_.round();
  hello.last_round_nodes = state_.round_nodes();
  hello.restarts_used = state_.restarts_used();
  hello.outcome = state_.unanswered_outcome();
  hello.config = config_.rendezvous.config;
  hello.rank0_port = rank0_port();
  auto own_age = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now() - started_);
  // Within the protocol's bound, which --launched-ms-ago alone may reach.
  hello.age_ms = std::min(own_age.count() + config_.launch_age.count(), proto::kMaxAgentAgeMs);
  hello.hosts_rendezvous = hosts_rendezvous_;
  hello.last_round_host_lost = last_round_host_lost_;
  // Moved since its round: the daemon here shows where the run came from.
  if (round_endpoint_ && *round_endpoint_ != fallback_) {
    std::string at = endpoint_text(*round_endpoint_);
    if (at.size() <= proto::kMaxEndpointBytes) hello.last_round_at = std::move(at);
  }
  return hello;
}

void Agent::connect() {
  const RendezvousSettings& settings = config_.rendezvous;
  if (connection_ == 0) fallback_ = settings.first_endpoint;
  ClientOptions options;
  HostPort endpoint = endpoint_at(fallback_);
  options.host = endpoint.host;
  options.port = endpoint.port;
  options.heartbeat_interval = settings.heartbeat_interval;
  options.heartbeat_timeout = std::chrono::milliseconds(settings.config.heartbeat_timeout_ms);
  options.connect_deadline = connect_deadline();
  options.token = settings.token;
  // A daemon of the run that welcomed this agent and is gone: after a heartbeat timeout without
  // it, the next fallback. Never before a first welcome: an agent that starts before the daemon
  // (or the node that hosts it) waits for it, as every other node does.
  may_move_on_ = ever_welcomed_ && fallback_ < settings.fallbacks.size() &&
                 options.heartbeat_timeout < options.connect_deadline;
  if (may_move_on_) {
    const FallbackEndpoint& next = settings.fallbacks[fallback_];
    // An agent's daemon silent for a whole heartbeat timeout: one that is alive answers a new
    // connection at once, so one heartbeat interval is slack enough.
    options.connect_deadline =
        lost_agent_host_silent_ ? options.heartbeat_interval : options.heartbeat_timeout;
    options.at_deadline = {
        cat("moving to ", host_port_text(next.host, next.port), " (--rdzv-fallback)"),
        lost_agent_host_silent_ ? "keep_alive_interval" : "heartbeat_timeout"};
    // An agent's daemon cannot come back in place: a refused port moves the run at once. Never
    // at an endpoint that has not welcomed this agent yet (its host may still be starting one).
    options.refused_is_final = lost_agent_hosted_;
  }
  client_ = std::make_unique<RendezvousClient>(
      io_, clock_, options,
      [this](proto::ControlMessage message) { on_message(std::move(message)); },
      [this](ConnectionLoss kind, const std::string& reason) {
        if (client_->welcomed()) {
          unanswered_since_.reset();  // the wait starts again from now
          ever_welcomed_ = true;
          lost_agent_hosted_ = client_->daemon_agent_hosted();
          lost_agent_host_silent_ = lost_agent_hosted_ && kind == ConnectionLoss::HeartbeatTimeout;
        }
        if (kind == ConnectionLoss::CannotReach && may_move_on_) {
          bool host_gone = client_->refused_for_good() || lost_agent_host_silent_;
          if (host_gone && host_in_round_) last_round_host_lost_ = true;
          return move_to_fallback(reason);
        }
        perform(state_.connection_lost(kind, reason));
      });
  client_->connect(
      [this, node_id = cat(node_base_id_, "#", connection_++)] { return make_hello(node_id); });
}

// The daemon is gone for good: the run's rendezvous moves to the next --rdzv-fallback endpoint,
// hosted here if it names this machine. The workers keep running; the daemon there rules on their
// round as a restarted daemon does, and its quorum keeps a minority from forming one.
void Agent::move_to_fallback(const std::string& why) {
  std::string left = endpoint_text(fallback_);
  const FallbackEndpoint& next = config_.rendezvous.fallbacks[fallback_++];
  later_schedule_.reset();
  event(agent_events::rendezvous_moved(event_source(), "fallback", left, endpoint_text(fallback_),
                                       why));
  lost_agent_hosted_ = false;  // the next endpoint has not welcomed this agent yet
  lost_agent_host_silent_ = false;
  log::warn(
      why, ": the rendezvous moves to ", host_port_text(next.host, next.port), " (--rdzv-fallback",
      state_.phase() == agent::AgentState::Phase::Running ? "; the workers keep running)" : ")");
  if (!hosted_endpoints_.count(fallback_) && next.local && config_.host_fallback &&
      config_.host_fallback(next)) {
    hosted_endpoints_.insert(fallback_);
  }
  hosts_rendezvous_ = hosted_endpoints_.count(fallback_) > 0;
  connect();
}

// The endpoint `index` as fallback_ counts them: 0 --rdzv-endpoint, n the n-th --rdzv-fallback.
HostPort Agent::endpoint_at(size_t index) const {
  const RendezvousSettings& settings = config_.rendezvous;
  if (index == 0) return {settings.host, settings.port};
  return {settings.fallbacks[index - 1].host, settings.fallbacks[index - 1].port};
}

std::string Agent::endpoint_text(size_t index) const {
  HostPort endpoint = endpoint_at(index);
  return host_port_text(endpoint.host, endpoint.port);
}

// The agent left the endpoint of its last round, has no round where it is now, and its end is
// not decided.
bool Agent::moved_since_round() const {
  using Phase = agent::AgentState::Phase;
  bool ending = exit_code_ || state_.phase() == Phase::Ending || state_.phase() == Phase::Finished;
  return !ending && round_endpoint_ && *round_endpoint_ != fallback_;
}

// The agent waits for a round at an endpoint whose daemon answers.
bool Agent::waits_for_round() const {
  return !exit_code_ && state_.phase() == agent::AgentState::Phase::Joining && client_ &&
         client_->connected() && client_->welcomed();
}

// With --rdzv-fallback, every heartbeat interval the agent may ask another endpoint's daemon, on a
// connection of its own, whether other live nodes of the run are there. Moved away from its last
// round's daemon and given no round since, it asks that daemon: this node may be the one cut off
// (a partition between it and that host alone), the run going on there without it while no
// majority comes to the fallback (go_back). Waiting for a round where it is, it asks the later
// endpoints in turn whether the run runs a round there: its side of a split was the minority,
// the majority moved on, and the network healed (follow_run). Backwards to a run still forming,
// forwards only to one in a round: a node never bounces between two endpoints that both wait.
// The turns are spread (LaterEndpointSchedule::turn_wait): the agents of a large job, welcomed
// together, do not all ask a standby daemon at once.
void Agent::watch_endpoints() {
  if (config_.rendezvous.fallbacks.empty() || endpoint_probe_ || exit_code_) return;
  double spread = std::uniform_real_distribution<double>()(chance_);
  endpoint_timer_->start_after(later_schedule_.turn_wait(spread), [this] {
    std::optional<size_t> endpoint = endpoint_to_ask();
    if (!endpoint) return watch_endpoints();
    const RendezvousSettings& settings = config_.rendezvous;
    HostPort host_port = endpoint_at(*endpoint);
    RunProbeTarget target;
    target.host = host_port.host;
    target.port = host_port.port;
    target.run_id = config_.env.run_id;
    target.token = settings.token;
    target.own_node_id = node_base_id_ + "#";
    target.heartbeat_timeout = std::chrono::milliseconds(settings.config.heartbeat_timeout_ms);
    target.deadline = settings.heartbeat_interval;
    target.running_only = *endpoint > fallback_;
    endpoint_probe_ = std::make_unique<RunProbe>(
        io_, clock_, target,
        [this, asked = *endpoint, asked_at = clock_.now()](const RunProbeAnswer& answer) {
          endpoint_answered(asked, asked_at, answer);
        });
    endpoint_probe_->start();
  });
}

// The endpoint to ask now, if any (see watch_endpoints): the later ones take turns, each when
// later_schedule_ says it is due.
std::optional<size_t> Agent::endpoint_to_ask() {
  if (moved_since_round()) return round_endpoint_;
  size_t later = config_.rendezvous.fallbacks.size() - fallback_;  // fallback_ counts up to it
  if (later == 0 || !waits_for_round()) return std::nullopt;
  for (size_t turn = 0; turn < later; ++turn) {
    size_t endpoint = fallback_ + 1 + later_asked_++ % later;
    if (later_schedule_.due(endpoint, clock_.now())) return endpoint;
  }
  return std::nullopt;
}

void Agent::endpoint_answered(size_t endpoint, SteadyTime asked_at, const RunProbeAnswer& answer) {
  endpoint_probe_.reset();
  int live_nodes = answer.live_nodes;
  if (live_nodes > 0 && moved_since_round() && endpoint == *round_endpoint_) {
    go_back(live_nodes);
  } else if (live_nodes > 0 && endpoint > fallback_ && waits_for_round()) {
    follow_run(endpoint, live_nodes);
  } else if (endpoint > fallback_ && answer.heard) {
    later_schedule_.answered_without_run(endpoint, asked_at,
                                         std::uniform_real_distribution<double>()(chance_));
  } else if (endpoint > fallback_) {
    later_schedule_.silent(endpoint);
  }
  watch_endpoints();
}

// The move was one node's: the rest of the run is where it was. Back there, as a node that lost
// its connection and reconnects (the workers keep running until that daemon rules on them).
void Agent::go_back(int live_nodes) {
  size_t back = *round_endpoint_;
  log::warn(
      "the rendezvous at ", endpoint_text(back), " answers again and ", live_nodes,
      live_nodes == 1 ? " other node of the run is" : " other nodes of the run are",
      " still there: this node goes back to it from ", endpoint_text(fallback_),
      " (--rdzv-fallback",
      state_.phase() == agent::AgentState::Phase::Running ? "; the workers keep running)" : ")");
  event(agent_events::rendezvous_moved(
      event_source(), "back", endpoint_text(fallback_), endpoint_text(back),
      cat(live_nodes, live_nodes == 1 ? " other node" : " other nodes",
          " of the run still there")));
  switch_endpoint(back, "back to " + endpoint_text(back));
}

// The run went on at a later endpoint without this node, which waits where the run was (it was
// cut off with the host of this endpoint, a minority): it joins the run there, as a new node. The
// run's round there is where it now is: it never asks its way back here.
void Agent::follow_run(size_t endpoint, int live_nodes) {
  log::warn("the run went on at ", endpoint_text(endpoint), " without this node (", live_nodes,
            live_nodes == 1 ? " live node" : " live nodes",
            " in a round there): this node follows it from ", endpoint_text(fallback_),
            " (--rdzv-fallback)");
  event(agent_events::rendezvous_moved(
      event_source(), "follow", endpoint_text(fallback_), endpoint_text(endpoint),
      cat("the run went on there without this node (", live_nodes,
          live_nodes == 1 ? " live node" : " live nodes", " in a round)")));
  round_endpoint_ = endpoint;
  switch_endpoint(endpoint, "following the run to " + endpoint_text(endpoint));
}

// Leaves the current endpoint's daemon and connects to `endpoint`'s, as a node that lost its
// connection reconnects.
void Agent::switch_endpoint(size_t endpoint, const std::string& leave_reason) {
  if (client_) {
    if (client_->welcomed()) unanswered_since_.reset();  // the wait starts again from now
    std::string to = endpoint_text(endpoint);  // the daemon left behind says where the run went
    client_->close(proto::Leave{leave_reason, to.size() <= proto::kMaxEndpointBytes ? to : ""});
  }
  fallback_ = endpoint;
  later_schedule_.reset();
  lost_agent_hosted_ = false;
  lost_agent_host_silent_ = false;
  hosts_rendezvous_ = hosted_endpoints_.count(fallback_) > 0;
  reconnect_timer_.cancel();
  connect();
}

// How long the next connection may take to be welcomed: what is left of the join timeout since
// the agent last had a daemon that answered (or since it started), so that reconnecting to
// something that never answers as a rendezvous ends instead of starting over each time.
std::chrono::milliseconds Agent::connect_deadline() {
  SteadyTime now = clock_.now();
  if (!unanswered_since_) unanswered_since_ = now;
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - *unanswered_since_);
  auto join_timeout = std::chrono::milliseconds(config_.rendezvous.config.join_timeout_ms);
  return std::max(std::chrono::milliseconds(0), join_timeout - waited);
}

void Agent::reconnect_after(std::chrono::milliseconds delay) {
  reconnect_timer_.expires_after(delay);
  reconnect_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) perform(state_.reconnect_due());
  });
}

void Agent::on_message(proto::ControlMessage message) {
  std::visit(
      [this](const auto& typed) {
        using T = std::decay_t<decltype(typed)>;
        if constexpr (std::is_same_v<T, proto::Waiting>)
          perform(state_.waiting(typed, std::chrono::steady_clock::now()));
        else if constexpr (std::is_same_v<T, proto::RoundAssigned>)
          perform(
              fits_world(typed)
                  ? on_round_assigned(typed)
                  : state_.connection_lost(
                        ConnectionLoss::Untrusted,
                        cat("protocol error: the rendezvous gave this node ranks ", typed.base_rank,
                            " to ", int64_t{typed.base_rank} + config_.nproc - 1,
                            ", past its world size of ", typed.world_size)));
        else if constexpr (std::is_same_v<T, proto::Restart>) {
          event(agent_events::workers_stopped(event_source(), state_.round(), typed.reason));
          perform(state_.restart(typed.reason));
        } else if constexpr (std::is_same_v<T, proto::Stop>) {
          event(agent_events::workers_stopped(event_source(), state_.round(), typed.reason));
          perform(state_.stop(typed));
        } else if constexpr (std::is_same_v<T, proto::Error>)
          perform(state_.error(typed));
        else if constexpr (std::is_same_v<T, proto::Complete>)
          perform(state_.complete());
        else if constexpr (std::is_same_v<T, proto::Notice>)
          log::warn("rendezvous: ", escape_for_terminal(typed.text));
        else if constexpr (std::is_same_v<T, proto::DumpRequest>) {
          bool ours = group_ && typed.round == group_round_;
          if (ours && group_->ask_for_dumps()) return;
          // Nothing to ask: what is on disk, at once (nothing once its workers are another
          // round's).
          send_on_disk_report(typed.round,
                              ours ? group_->dumps_on_disk() : std::vector<FlightRecorderDump>{});
        }
      },
      message);
}

// A new round: whether the daemon's host is in it (for a move, should that daemon refuse); a
// host lost before it is no longer news.
agent::Actions Agent::on_round_assigned(const proto::RoundAssigned& round) {
  round_endpoint_ = fallback_;
  later_schedule_.reset();  // should the round break, the later endpoints are news again
  host_in_round_ = round.host_member;
  last_round_host_lost_ = false;
  return state_.round_assigned(round);
}

// The decoder checked the round's own bounds; this node's ranks must also be inside its world.
bool Agent::fits_world(const proto::RoundAssigned& round) const {
  return int64_t{round.base_rank} + config_.nproc <= round.world_size;
}

void Agent::start_group_after_probe(const proto::RoundAssigned& assigned) {
  if (!torch_probe_ || !torch_probe_->running()) return start_group(assigned);
  pending_round_ = assigned;
  torch_probe_->after([this] {
    if (exit_code_ || !pending_round_) return;
    proto::RoundAssigned round = *pending_round_;
    pending_round_.reset();
    start_group(round);
  });
}

// Stopped before the workers were started (the torch probe still ran): a group that never ran.
void Agent::drop_pending_start() {
  pending_round_.reset();
  boost::asio::post(io_, [this] { on_group_done(GroupOutcome{GroupOutcome::Kind::Stopped, {}}); });
}

void Agent::start_group(const proto::RoundAssigned& assigned) {
  if (torch_probe_ && !torch_probe_->running()) {
    std::optional<TorchVersion> torch = torch_probe_->version();
    config_.env.torch_major = torch ? std::optional<int>(torch->major) : std::nullopt;
    config_.env.torch_minor = torch ? std::optional<int>(torch->minor) : std::nullopt;
  }
  RoundInfo round = round_info(assigned, config_.rendezvous.rank0_store);
  if (std::string error = logs_.prepare_attempt(round.round, config_.nproc); !error.empty()) {
    return perform(state_.group_start_failed(error));
  }
  if (file_timer_) file_timer_->clear();  // the last round's workers are gone
  report_bindings(round);
  group_ =
      std::make_unique<WorkerGroup>(io_, clock_, spawner_, config_.shutdown_timeout, config_.hang);
  group_round_ = round.round;
  group_base_rank_ = round.base_rank;
  listen_for_dumps(round);
  group_->start(plan_workers(round),
                [this](GroupOutcome outcome) { on_group_done(std::move(outcome)); });
  report_progress_later();
}

// A hang here asks the daemon to have every other node's ranks dump too; whenever a dump wait
// ends (this node's hang, or another's), the dumps go to the daemon, reduced, for the verdict on
// which collective and which rank.
void Agent::listen_for_dumps(const RoundInfo& round) {
  std::chrono::milliseconds timeout = dump_timeout();
  WorkerGroup::DumpListener listener;
  listener.hang_declared = [this, round = round.round, timeout] {
    if (client_) client_->send(proto::HangDeclared{round, timeout.count()});
  };
  listener.dumps_taken = [this, round, timeout](const std::vector<FlightRecorderDump>& dumps) {
    dump_reports_.make([round = round.round, host = config_.host_name, base = round.base_rank,
                        ranks = config_.nproc, dumps, timeout] {
      return collective_report(round, host, base, ranks, dumps, timeout);
    });
  };
  group_->set_dump_listener(std::move(listener));
}

// While the group runs: its workers' progress, to the daemon, every progress_interval.
void Agent::report_progress_later() {
  if (!progress_timer_) progress_timer_ = clock_.make_timer();
  progress_timer_->start_after(progress_interval(config_.hang), [this] {
    if (!group_ || group_->stopping()) return;
    send_progress(/*hang=*/false);
    report_progress_later();
  });
}

void Agent::send_progress(bool hang) {
  if (!client_ || !group_) return;
  proto::Progress progress;
  progress.round = state_.round();
  progress.hang = hang;
  progress.hang_timeout_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.hang.timeout).count();
  progress.straggler_factor_pct = config_.straggler_factor_pct;
  progress.host = config_.host_name.substr(0, proto::kMaxProgressHostBytes);
  progress.ranks = group_->progress();
  client_->send(progress);
}

std::chrono::milliseconds Agent::dump_timeout() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(config_.hang.dump_timeout);
}

// The report of the dumps this node's ranks have on disk for `round`, read without asking (off
// this thread); no ranks when `round` is not the current group's.
void Agent::send_on_disk_report(int round, std::vector<FlightRecorderDump> dumps) {
  bool ours = group_ && round == group_round_;
  dump_reports_.make([round, host = config_.host_name, base = ours ? group_base_rank_ : -1,
                      ranks = ours ? config_.nproc : 0, dumps = std::move(dumps)] {
    return collective_report(round, host, base, ranks, dumps, {},
                             "no dump on disk (its workers had ended)");
  });
}

// --report-bindings: each round, since the global ranks may change from one to the next.
void Agent::report_bindings(const RoundInfo& round) const {
  if (!config_.report_bindings) return;
  std::string lines;
  for (int local_rank = 0; local_rank < config_.nproc; ++local_rank) {
    size_t index = static_cast<size_t>(local_rank);
    WorkerBinding binding =
        index < config_.bindings.size() ? config_.bindings[index] : WorkerBinding{};
    lines += binding_report_line(round.base_rank + local_rank, local_rank, binding);
  }
  console::write_message(STDERR_FILENO, lines);
}

std::vector<WorkerPlan> Agent::plan_workers(const RoundInfo& round) const {
  std::vector<WorkerPlan> plans;
  for (int local_rank = 0; local_rank < config_.nproc; ++local_rank) {
    WorkerPlan plan;
    plan.local_rank = local_rank;
    plan.rank = round.base_rank + local_rank;
    plan.error_file = logs_.error_file(round.round, local_rank);
    plan.error_file_kept = !logs_.temporary();
    plan.log_dir = logs_.rank_dir(round.round, local_rank);
    plan.out = route_stream(config_.output, local_rank, kStdout);
    plan.err = route_stream(config_.output, local_rank, kStderr);
    if (!logs_.enabled()) plan.out.file = plan.err.file = false;
    if (!config_.output.raw) {
      plan.prefix = line_prefix(config_.output.prefix_template, config_.env.role, local_rank,
                                plan.rank, config_.host_name);
    }
    if (logs_.enabled()) {
      std::string attempt_dir = logs_.attempt_dir(round.round);
      plan.out_copy = {attempt_dir + "/filtered_stdout.log", config_.output.stdout_filters};
      plan.err_copy = {attempt_dir + "/filtered_stderr.log", config_.output.stderr_filters};
    }
    plan.request.executable = config_.executable;
    if (!config_.python_worker) plan.request.argv0 = config_.entrypoint_name;  // as torchrun
    for (const auto& arg : config_.args) {
      plan.request.args.push_back(substitute(arg, "local_rank", std::to_string(local_rank)));
    }
    EnvMap vars = worker_variables(config_.env, round, local_rank, plan.error_file, agent_env_);
    if (std::string python_dir = python_helper_dir(); !python_dir.empty())
      vars["PYTHONPATH"] = python_path_with(python_dir, agent_env_);
    if (config_.hang.enabled()) {
      std::string attempt_dir = logs_.attempt_dir(round.round);
      vars.merge(hang_variables(attempt_dir, agent_env_, config_.env));
      plan.nccl_dump_pipe = nccl_dump_pipe(vars, plan.rank);
      plan.nccl_dump_file = nccl_dump_file(vars, plan.rank);
      plan.python = is_python(config_.executable);
      plan.stack_tool = stack_tool_;
      if (!attempt_dir.empty())
        plan.hang_file = attempt_dir + "/hang-rank" + std::to_string(plan.rank) + ".txt";
    }
    if (static_cast<size_t>(local_rank) < config_.bindings.size()) {
      plan.request.binding = config_.bindings[static_cast<size_t>(local_rank)].cpu;
      for (auto& [name, value] : binding_variables(plan.request.binding, agent_env_))
        vars[name] = value;
    }
    plan.request.env = merge_env(agent_env_, vars);
    plans.push_back(std::move(plan));
  }
  return plans;
}

void Agent::on_group_done(GroupOutcome outcome) {
  switch (outcome.kind) {
    case GroupOutcome::Kind::Succeeded:
      return perform(state_.group_succeeded());
    case GroupOutcome::Kind::Failed:
      return perform(state_.group_failed(outcome.failures));
    case GroupOutcome::Kind::Stopped:
      return perform(state_.group_stopped(outcome.after_stop));
  }
}

void Agent::report_failure(const agent::ReportFailure& failure) {
  if (failure.late) {  // only for the daemon's judgement of a failure every node shares
    if (client_) client_->send(failure.report);
    return;
  }
  event(agent_events::worker_failed(event_source(), state_.round(), failure.root_cause));
  auto own_error_file = agent_env_.find("TORCHELASTIC_ERROR_FILE");
  if (own_error_file != agent_env_.end() && !own_error_file->second.empty()) {
    write_root_cause_file(own_error_file->second, failure.root_cause);
  }
  // A hang: every rank's silence with it, so that the daemon can tell which rank, on any node,
  // went silent first.
  if (failure.root_cause.hang) send_progress(/*hang=*/true);
  // Not cohort's hang, but PyTorch's watchdog dumped on a collective timeout: the daemon gathers
  // every node's dumps as for a hang before it rules on this failure.
  if (!failure.root_cause.hang && group_) {
    std::vector<FlightRecorderDump> dumps = group_->dumps_on_disk();
    if (!dumps.empty()) {
      client_->send(proto::HangDeclared{group_round_, dump_timeout().count()});
      send_on_disk_report(group_round_, std::move(dumps));
    }
  }
  client_->send(failure.report);
}

void Agent::finish(int exit_code) {
  if (exit_code_) return;
  exit_code_ = exit_code;
  event(agent_events::agent_finished(event_source(), exit_code));
  signals_.cancel();
  reconnect_timer_.cancel();
  health_retry_.cancel();
  health_.reset();
  gpu_health_.reset();
  if (stdin_) stdin_->close();
  group_.reset();
  // What a health check (or anything else) left behind in a session of its own came to this
  // subreaper: it ends with the agent, workers or not.
  reaper_.kill_orphans({keeper_.pid()});
  file_timer_.reset();
  if (progress_timer_) progress_timer_->cancel();
  endpoint_timer_->cancel();
  endpoint_probe_.reset();
  if (client_) client_->close();
  auto done = [this] {
    client_.reset();
    io_.stop();
  };
  if (config_.before_exit) return config_.before_exit(done);
  done();
}

}  // namespace cohort
