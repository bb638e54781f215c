#include "agent/agent.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstring>
#include <random>

#include "agent/error_file.hpp"
#include "agent/failure_summary.hpp"
#include "common/exit_codes.hpp"
#include "common/free_port.hpp"
#include "common/log.hpp"
#include "common/signal_names.hpp"

extern char** environ;

namespace cohort {
namespace {

std::string random_suffix() {
  std::random_device device;
  return std::to_string(device() % 100000);
}

}  // namespace

Agent::Agent(boost::asio::io_context& io, AgentConfig config)
    : io_(io),
      config_(std::move(config)),
      agent_env_(parse_environ(environ)),
      reaper_(io),
      logs_(config_.log_dir, config_.env.run_id),
      signals_(io),
      reconnect_timer_(io) {
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) signals_.add(signal);
  for (int signal : config_.extra_signals) signals_.add(signal);
  for (int signal : config_.absorbed_signals) signals_.add(signal);
  node_base_id_ = cat(config_.rendezvous.address, ":", ::getpid(), ":", random_suffix());
}

Agent::~Agent() = default;

int Agent::run() {
  if (!keeper_.start()) log::warn("cannot start the process-group keeper: ", std::strerror(errno));
  ::signal(SIGPIPE, SIG_IGN);
  if (config_.nproc > 1 && agent_env_.count("OMP_NUM_THREADS") == 0) {
    std::string warning =
        "setting OMP_NUM_THREADS=1 for each worker to avoid overloading the system; set it "
        "yourself to tune performance";
    config_.under_launch ? log::info(warning) : log::warn(warning);  // the launcher says it once
  }
  arm_signals();
  if (config_.under_launch) watch_stdin();
  connect();
  io_.run();
  return exit_code_.value_or(kExitInternal);
}

void Agent::arm_signals() {
  signals_.async_wait([this](const boost::system::error_code& error, int signal) {
    if (error) return;
    on_signal(signal);
    arm_signals();
  });
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
        if (state_ == State::Finishing || stop_signal_ != 0 || run_ended_) return;
        log::warn("the connection to cohort launch is gone (stdin closed): stopping the workers");
        on_signal(SIGHUP);
      });
}

int Agent::rank0_port() const {
  if (!config_.rendezvous.rank0_store) return 0;
  return pick_free_port(config_.rendezvous.address.empty() ? "0.0.0.0"
                                                           : config_.rendezvous.address);
}

proto::Hello Agent::make_hello() {
  proto::Hello hello;
  hello.run_id = config_.env.run_id;
  hello.node_id = cat(node_base_id_, "#", connection_++);
  hello.address = config_.rendezvous.address;
  hello.local_world_size = config_.nproc;
  hello.rank_hint = config_.rendezvous.rank_hint;
  hello.last_round = round_;
  hello.restarts_used = restarts_seen_;
  hello.config = config_.rendezvous.config;
  hello.rank0_port = rank0_port();
  return hello;
}

void Agent::connect() {
  const RendezvousSettings& settings = config_.rendezvous;
  ClientOptions options;
  options.host = settings.host;
  options.port = settings.port;
  options.heartbeat_interval = settings.heartbeat_interval;
  options.heartbeat_timeout = std::chrono::milliseconds(settings.config.heartbeat_timeout_ms);
  options.connect_deadline = std::chrono::milliseconds(settings.config.join_timeout_ms);
  options.token = settings.token;
  state_ = State::Joining;
  client_ = std::make_unique<RendezvousClient>(
      io_, clock_, options,
      [this](proto::ControlMessage message) { on_message(std::move(message)); },
      [this](const std::string& reason) { on_lost(reason); });
  client_->connect(make_hello());
}

void Agent::on_message(proto::ControlMessage message) {
  if (state_ == State::Finishing) return;
  std::visit(
      [this](const auto& typed) {
        using T = std::decay_t<decltype(typed)>;
        if constexpr (std::is_same_v<T, proto::Waiting>)
          on_waiting(typed);
        else if constexpr (std::is_same_v<T, proto::RoundAssigned>)
          on_round(typed);
        else if constexpr (std::is_same_v<T, proto::Restart>)
          on_restart(typed.reason);
        else if constexpr (std::is_same_v<T, proto::Stop>)
          on_stop(typed);
        else if constexpr (std::is_same_v<T, proto::Error>)
          on_error(typed);
        else if constexpr (std::is_same_v<T, proto::Complete>) {
          log::info("every node finished: the run is complete");
          stop_group_then(SIGTERM, [this] { finish(kExitSuccess); });
        }
      },
      message);
}

void Agent::on_waiting(const proto::Waiting& waiting) {
  bool short_of_nodes = waiting.joined < waiting.min_nodes;
  bool last_call = waiting.last_call_in_ms && waiting.joined < waiting.max_nodes;
  if (!short_of_nodes && !last_call) return;
  auto now = std::chrono::steady_clock::now();
  log::Level level = config_.under_launch ? log::Level::Info : log::Level::Warn;
  if (now - last_progress_ < std::chrono::seconds(1) || !log::enabled(level)) return;
  last_progress_ = now;
  std::string line =
      cat("cohort: waiting for nodes: ", waiting.joined, "/",
          waiting.min_nodes == waiting.max_nodes ? std::to_string(waiting.max_nodes)
                                                 : cat(waiting.min_nodes, "-", waiting.max_nodes));
  if (waiting.last_call_in_ms) {
    line += cat(", last call in ", (*waiting.last_call_in_ms + 999) / 1000, " s");
  }
  write_all(STDERR_FILENO, line + "\n");
}

void Agent::on_round(const proto::RoundAssigned& assigned) {
  RoundInfo round;
  round.round = assigned.round;
  round.group_rank = assigned.group_rank;
  round.group_world_size = assigned.group_world_size;
  round.base_rank = assigned.base_rank;
  round.world_size = assigned.world_size;
  round.master_addr = assigned.master_addr;
  round.master_port = assigned.master_port;
  round.use_agent_store = !config_.rendezvous.rank0_store;
  round_ = assigned.round;
  restarts_seen_ = assigned.restarts_used;
  log::info("joined round=", round.round, " group_rank=", round.group_rank, " of ",
            round.group_world_size, " world_size=", round.world_size, " master=", round.master_addr,
            ":", round.master_port);
  stop_group_then(SIGTERM, [this, round] { start_group(round); });
}

void Agent::on_restart(const std::string& reason) {
  log::warn("restarting the workers: ", reason);
  state_ = State::Restarting;
  stop_group_then(SIGTERM, [this] {
    state_ = State::Joining;
    client_->send(proto::Join{rank0_port()});
  });
}

void Agent::on_stop(const proto::Stop& stop) {
  run_ended_ = true;
  stop_group_then(SIGTERM, [this, stop] {
    // Under cohort launch every host's lines reach one console: only the host whose failure
    // is the root cause prints the summary there.
    bool own = stop.summary == sent_summary_;
    if (!stop.summary.empty() && (own || !config_.under_launch))
      write_all(STDERR_FILENO, stop.summary);
    else if (stop.summary.empty() && !config_.under_launch)
      log::error("the run failed: ", stop.reason);
    else
      log::info("the run failed: ", stop.reason);
    finish(stop.exit_status);
  });
}

void Agent::on_error(const proto::Error& error) {
  if (error.rejoin) {
    log::warn("the rendezvous dropped this node (", error.message, "): rejoining as a new node");
    client_->close();
    stop_group_then(SIGTERM, [this] { connect(); });
    return;
  }
  client_->close();
  stop_group_then(SIGTERM, [this, message = error.message] {
    log::error("rendezvous: ", message);
    finish(kExitRendezvous);
  });
}

void Agent::on_lost(const std::string& reason) {
  if (state_ == State::Finishing) return;
  if (!client_ || reason.rfind("cannot reach", 0) == 0) {
    stop_group_then(SIGTERM, [this, reason] {
      log::error(reason);
      finish(kExitRendezvous);
    });
    return;
  }
  log::warn(reason, "; reconnecting (the workers keep running)");
  reconnect_timer_.expires_after(std::chrono::milliseconds(50));
  reconnect_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error && state_ != State::Finishing) connect();
  });
}

void Agent::start_group(const RoundInfo& round) {
  if (std::string error = logs_.prepare_attempt(round.round, config_.nproc); !error.empty()) {
    log::error(error);
    return finish(kExitInternal);
  }
  state_ = State::Running;
  group_ = std::make_unique<WorkerGroup>(io_, clock_, spawner_, config_.shutdown_timeout);
  group_running_ = true;
  group_->start(plan_workers(round), [this](GroupOutcome outcome) {
    group_running_ = false;
    on_group_done(std::move(outcome));
  });
}

std::vector<WorkerPlan> Agent::plan_workers(const RoundInfo& round) const {
  std::vector<WorkerPlan> plans;
  for (int local_rank = 0; local_rank < config_.nproc; ++local_rank) {
    WorkerPlan plan;
    plan.local_rank = local_rank;
    plan.rank = round.base_rank + local_rank;
    plan.error_file = logs_.error_file(round.round, local_rank);
    plan.log_dir = logs_.rank_dir(round.round, local_rank);
    plan.out = route_stream(config_.output, local_rank, kStdout);
    plan.err = route_stream(config_.output, local_rank, kStderr);
    if (!logs_.enabled()) plan.out.file = plan.err.file = false;
    if (!config_.output.raw) {
      plan.prefix =
          line_prefix(config_.output.prefix_template, config_.env.role, local_rank, plan.rank);
    }
    plan.request.executable = config_.executable;
    for (const auto& arg : config_.args) {
      plan.request.args.push_back(substitute(arg, "local_rank", std::to_string(local_rank)));
    }
    EnvMap vars = worker_variables(config_.env, round, local_rank, plan.error_file, agent_env_);
    plan.request.env = merge_env(agent_env_, vars);
    plans.push_back(std::move(plan));
  }
  return plans;
}

void Agent::on_group_done(GroupOutcome outcome) {
  if (after_group_) {
    auto next = std::move(after_group_);
    after_group_ = nullptr;
    return next();
  }
  switch (outcome.kind) {
    case GroupOutcome::Kind::Succeeded:
      log::info("the workers of this node finished; waiting for the other nodes");
      state_ = State::Reported;
      client_->send(proto::NodeSucceeded{round_});
      return;
    case GroupOutcome::Kind::Failed:
      return report_failure(std::move(outcome.failures));
    case GroupOutcome::Kind::Stopped:
      return finish(kExitInternal);
  }
}

void Agent::report_failure(std::vector<WorkerFailure> failures) {
  const WorkerFailure& root = failures[root_cause_index(failures)];
  std::string summary =
      format_failure_summary(config_.entrypoint_name, config_.host_name, failures);
  auto own_error_file = agent_env_.find("TORCHELASTIC_ERROR_FILE");
  if (own_error_file != agent_env_.end() && !own_error_file->second.empty()) {
    write_root_cause_file(own_error_file->second, root);
  }
  log::warn("worker rank=", root.rank, " failed with ", root.status.describe());
  state_ = State::Reported;
  sent_summary_ = summary;
  client_->send(proto::WorkerFailed{round_, root.rank, root.local_rank, root.status.shell_code(),
                                    root.status.describe(), config_.host_name, summary});
}

void Agent::on_signal(int signal) {
  if (std::find(config_.absorbed_signals.begin(), config_.absorbed_signals.end(), signal) !=
      config_.absorbed_signals.end()) {
    return log::info(signal_name(signal), ": Slurm delivers it to the workers itself");
  }
  if (!is_termination_signal(signal)) {
    log::info("forwarding ", signal_name(signal), " to the workers");
    if (group_running_) group_->forward_signal(signal);
    return;
  }
  if (stop_signal_ != 0) {
    log::warn("received ", signal_name(signal), " again: killing the workers now");
    if (group_running_) group_->stop(SIGKILL);
    return;
  }
  stop_signal_ = signal;
  if (client_) client_->close(proto::Leave{"stopped by " + signal_name(signal)});
  if (group_running_) {
    log::warn("received ", signal_name(signal), ": stopping the workers (shutdown timeout ",
              config_.shutdown_timeout.count(), " ms)");
  }
  after_group_ = nullptr;
  stop_group_then(signal, [this, signal] { finish(128 + signal); });
}

void Agent::stop_group_then(int signal, std::function<void()> next) {
  if (!group_running_) return next();
  after_group_ = std::move(next);
  if (!group_->stopping()) group_->stop(signal);
}

void Agent::finish(int exit_code) {
  if (state_ == State::Finishing) return;
  state_ = State::Finishing;
  exit_code_ = exit_code;
  signals_.cancel();
  reconnect_timer_.cancel();
  if (stdin_) stdin_->close();
  group_.reset();
  if (client_) client_->close();
  auto done = [this] {
    client_.reset();
    io_.stop();
  };
  if (config_.before_exit) return config_.before_exit(done);
  done();
}

}  // namespace cohort
