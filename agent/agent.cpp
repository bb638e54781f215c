#include "agent/agent.hpp"

#include <unistd.h>

#include <csignal>
#include <cstring>

#include "agent/error_file.hpp"
#include "agent/failure_summary.hpp"
#include "agent/restart_policy.hpp"
#include "common/free_port.hpp"
#include "common/log.hpp"
#include "common/signal_names.hpp"

extern char** environ;

namespace cohort {

Agent::Agent(boost::asio::io_context& io, AgentConfig config)
    : io_(io), config_(std::move(config)), agent_env_(parse_environ(environ)), reaper_(io),
      logs_(config_.log_dir, config_.env.run_id), signals_(io), restart_timer_(io) {
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) signals_.add(signal);
  for (int signal : config_.extra_signals) signals_.add(signal);
}

Agent::~Agent() = default;

int Agent::run() {
  if (!keeper_.start()) log::warn("cannot start the process-group keeper: ", std::strerror(errno));
  ::signal(SIGPIPE, SIG_IGN);
  if (config_.nproc > 1 && agent_env_.count("OMP_NUM_THREADS") == 0) {
    log::warn("setting OMP_NUM_THREADS=1 for each worker to avoid overloading the system; "
              "set it yourself to tune performance");
  }
  arm_signals();
  start_round();
  io_.run();
  return exit_code_.value_or(1);
}

void Agent::arm_signals() {
  signals_.async_wait([this](const boost::system::error_code& error, int signal) {
    if (error) return;
    on_signal(signal);
    arm_signals();
  });
}

void Agent::start_round() {
  RoundInfo round;
  round.round = round_;
  round.world_size = config_.nproc;
  round.master_addr = config_.master_addr;
  round.master_port = config_.fixed_master_port != 0 ? config_.fixed_master_port
                                                     : pick_free_port(config_.master_addr);
  if (std::string error = logs_.prepare_attempt(round_, config_.nproc); !error.empty()) {
    log::error(error);
    return finish(1);
  }
  log::info("starting round=", round_, " workers=", config_.nproc, " master=",
            round.master_addr, ":", round.master_port);
  group_ = std::make_unique<WorkerGroup>(io_, reaper_, keeper_, config_.shutdown_timeout);
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
      plan.prefix = line_prefix(config_.output.prefix_template, config_.env.role, local_rank,
                                plan.rank);
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
  if (stop_signal_ != 0) return finish(128 + stop_signal_);
  switch (outcome.kind) {
    case GroupOutcome::Kind::Succeeded:
      log::info("all workers finished successfully");
      return finish(0);
    case GroupOutcome::Kind::Stopped:
      return finish(1);
    case GroupOutcome::Kind::Failed:
      break;
  }
  const WorkerFailure& first = outcome.failures[root_cause_index(outcome.failures)];
  RestartDecision decision = decide_restart(restarts_done_, config_.env.max_restarts);
  if (!decision.restart) return fail(std::move(outcome.failures));
  ++restarts_done_;
  ++round_;
  log::warn("worker rank=", first.rank, " failed with ", first.status.describe(), "; restart ",
            restarts_done_, "/", config_.env.max_restarts, " in ", decision.delay.count(), " ms");
  restart_timer_.expires_after(decision.delay);
  restart_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error && stop_signal_ == 0) start_round();
  });
}

void Agent::on_signal(int signal) {
  if (!is_termination_signal(signal)) {
    log::info("forwarding ", signal_name(signal), " to the workers");
    if (group_) group_->forward_signal(signal);
    return;
  }
  if (stop_signal_ != 0) {
    log::warn("received ", signal_name(signal), " again: killing the workers now");
    if (group_running_) group_->stop(SIGKILL);
    return;
  }
  stop_signal_ = signal;
  restart_timer_.cancel();
  if (!group_running_) return finish(128 + signal);
  log::warn("received ", signal_name(signal), ": stopping the workers (shutdown timeout ",
            config_.shutdown_timeout.count(), " ms)");
  if (!group_->stopping()) group_->stop(signal);
}

void Agent::fail(std::vector<WorkerFailure> failures) {
  std::string summary = format_failure_summary(config_.entrypoint_name, config_.host_name,
                                               failures);
  write_all(STDERR_FILENO, summary);
  const WorkerFailure& root = failures[root_cause_index(failures)];
  auto own_error_file = agent_env_.find("TORCHELASTIC_ERROR_FILE");
  if (own_error_file != agent_env_.end() && !own_error_file->second.empty()) {
    write_root_cause_file(own_error_file->second, root);
  }
  finish(root.status.shell_code());
}

void Agent::finish(int exit_code) {
  exit_code_ = exit_code;
  signals_.cancel();
  restart_timer_.cancel();
  group_.reset();
  io_.stop();
}

}  // namespace cohort
