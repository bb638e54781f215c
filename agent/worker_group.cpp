#include "agent/worker_group.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <csignal>
#include <cstring>
#include <fstream>

#include "agent/error_file.hpp"
#include "common/log.hpp"

namespace cohort {

struct WorkerGroup::Worker {
  explicit Worker(boost::asio::io_context& io) : child(io) {}

  WorkerPlan plan;
  size_t index = 0;
  SpawnedChild child;
  std::deque<std::string> spawn_error;
};

namespace {

constexpr std::chrono::seconds kDrainTimeout{2};

std::vector<std::string> read_last_lines(const std::string& path, size_t count) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line.substr(0, 1024));
    if (lines.size() > count) lines.pop_front();
  }
  return {lines.begin(), lines.end()};
}

int open_log_file(const std::string& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

}  // namespace

WorkerGroup::WorkerGroup(boost::asio::io_context& io, Clock& clock, ProcessSpawner& spawner,
                         std::chrono::milliseconds grace)
    : io_(io),
      spawner_(spawner),
      grace_(grace),
      grace_timer_(clock.make_timer()),
      drain_timer_(clock.make_timer()) {}

WorkerGroup::~WorkerGroup() {
  *alive_ = false;
  for (auto& worker : workers_) {
    if (!worker->child.status() && worker->child.pid() > 0)
      spawner_.signal_group(worker->child.pid(), SIGKILL);
  }
  spawner_.close_container(container_);
}

void WorkerGroup::start(std::vector<WorkerPlan> plans, Done done) {
  done_ = std::move(done);
  container_ = spawner_.open_container();
  for (auto& plan : plans) {
    workers_.push_back(std::make_unique<Worker>(io_));
    workers_.back()->plan = std::move(plan);
    workers_.back()->index = workers_.size() - 1;
  }
  for (auto& worker : workers_) {
    if (stopping_) {  // an earlier worker could not start: do not start the rest
      worker->child.never_ran(ExitStatus::killed_by(SIGKILL));
      continue;
    }
    start_worker(*worker);
  }
  maybe_finish();
}

// Returns the fd the child gets for one stream, and sets up a pump when the agent must read it.
int WorkerGroup::open_stream(Worker& worker, const StreamRoute& route, const StreamCopy& copy,
                             int console_fd, const char* file, SpawnedChild::Stream stream) {
  const WorkerPlan& plan = worker.plan;
  int file_fd = -1;
  if (route.file) {
    file_fd = open_log_file(plan.log_dir + "/" + file);
    if (file_fd < 0) log::warn("cannot open ", plan.log_dir, "/", file, ": ", std::strerror(errno));
  }
  if (!route.console) {
    if (file_fd >= 0) return worker.child.for_child(file_fd);
    return worker.child.for_child(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  }
  if (plan.prefix.empty() && file_fd < 0) return -1;  // raw console: inherit the agent's stream
  PumpTarget target{console_fd, file_fd, plan.prefix};
  if (!copy.path.empty() && !copy.filters.empty()) {
    target.copy_fd = open_log_file(copy.path);
    if (target.copy_fd < 0) log::warn("cannot open ", copy.path, ": ", std::strerror(errno));
    target.copy_filters = copy.filters;
  }
  int copy_fd = target.copy_fd;
  int child_end = worker.child.pipe_to(stream, std::move(target));
  if (child_end < 0) {
    worker.child.for_child(file_fd);
    worker.child.for_child(copy_fd);
    return -1;
  }
  worker.child.keep(file_fd);  // the pump writes them as long as the worker lives
  worker.child.keep(copy_fd);
  return child_end;
}

void WorkerGroup::start_worker(Worker& worker) {
  SpawnRequest& request = worker.plan.request;
  request.container = container_;
  request.stdout_fd = open_stream(worker, worker.plan.out, worker.plan.out_copy, STDOUT_FILENO,
                                  "stdout.log", SpawnedChild::Stream::Out);
  request.stderr_fd = open_stream(worker, worker.plan.err, worker.plan.err_copy, STDERR_FILENO,
                                  "stderr.log", SpawnedChild::Stream::Err);

  SpawnedChild::Events events{[this, &worker](ExitStatus status) { on_exit(worker, status); },
                              [this] { maybe_finish(); }};
  std::error_code error;
  if (!worker.child.spawn(spawner_, request, std::move(events), error)) {
    std::string message =
        cat("cohort: cannot execute '", request.executable, "': ", error.message());
    write_all(STDERR_FILENO, message + "\n");
    worker.spawn_error.push_back(message);
    worker.child.never_ran(ExitStatus::exited(127));
    record_failure(worker, ExitStatus::exited(127));
    stop(SIGTERM);
    return;
  }
  log::debug("started worker local_rank=", worker.plan.local_rank, " rank=", worker.plan.rank,
             " pid=", worker.child.pid());
}

void WorkerGroup::on_exit(Worker& worker, ExitStatus status) {
  spawner_.signal_group(worker.child.pid(), SIGKILL);  // whatever the worker left in its group
  log::debug("worker local_rank=", worker.plan.local_rank, " pid=", worker.child.pid(),
             " ended with ", status.describe());
  if (!status.success() && !stopping_) {
    record_failure(worker, status);
    stop(SIGTERM);
  }
  maybe_finish();
}

void WorkerGroup::record_failure(Worker& worker, ExitStatus status) {
  WorkerFailure failure;
  failure.local_rank = worker.plan.local_rank;
  failure.rank = worker.plan.rank;
  failure.pid = std::max(worker.child.pid(), 0);
  failure.status = status;
  failure.time = std::chrono::system_clock::now();
  failure.error_file = worker.plan.error_file;
  failure.error_file_kept = worker.plan.error_file_kept;
  failures_.push_back(std::move(failure));
  failed_workers_.push_back(worker.index);
}

void WorkerGroup::forward_signal(int signal) {
  for (auto& worker : workers_) {
    if (!worker->child.status() && worker->child.pid() > 0)
      spawner_.signal_group(worker->child.pid(), signal);
  }
}

void WorkerGroup::stop(int signal) {
  if (stopping_ || signal == SIGKILL) {
    stopping_ = true;
    return kill_all();
  }
  stopping_ = true;
  forward_signal(signal);
  grace_timer_->start_after(grace_, [this] {
    log::warn("workers did not stop within the shutdown timeout: sending SIGKILL");
    kill_all();
  });
}

void WorkerGroup::kill_all() {
  forward_signal(SIGKILL);
  spawner_.kill_container(container_);
}

void WorkerGroup::maybe_finish() {
  if (finished_) return;
  bool all_exited = true, all_drained = true;
  for (const auto& worker : workers_) {
    all_exited = all_exited && worker->child.status().has_value();
    all_drained = all_drained && worker->child.drained();
  }
  if (!all_exited) return;
  grace_timer_->cancel();
  if (!container_killed_) {
    // What the workers left running (a daemon in its own session, say) ends with them, and with
    // it the pipes it still held.
    container_killed_ = true;
    spawner_.kill_container(container_);
  }
  if (all_drained) return finish();
  // Exited, but something (an escaped grandchild) still holds a pipe: wait a little, then give up.
  drain_timer_->start_after(kDrainTimeout, [this] {
    for (auto& worker : workers_) worker->child.close_pumps();
  });
}

void WorkerGroup::finish() {
  finished_ = true;
  drain_timer_->cancel();
  GroupOutcome outcome;
  for (size_t i = 0; i < failures_.size(); ++i) {
    WorkerFailure failure = failures_[i];
    const Worker& worker = *workers_[failed_workers_[i]];
    if (const auto& err_pump = worker.child.pump(SpawnedChild::Stream::Err)) {
      const auto& tail = err_pump->tail();
      failure.stderr_tail.assign(tail.begin(), tail.end());
    } else if (worker.plan.err.file) {
      failure.stderr_tail =
          read_last_lines(worker.plan.log_dir + "/stderr.log", OutputPump::kTailLines);
    }
    failure.stderr_tail.insert(failure.stderr_tail.end(), worker.spawn_error.begin(),
                               worker.spawn_error.end());
    load_error_file(failure);
    outcome.failures.push_back(std::move(failure));
  }
  if (!outcome.failures.empty())
    outcome.kind = GroupOutcome::Kind::Failed;
  else if (stopping_)
    outcome.kind = GroupOutcome::Kind::Stopped;
  boost::asio::post(
      io_, [done = std::move(done_), outcome = std::move(outcome), alive = alive_]() mutable {
        if (*alive) done(std::move(outcome));
      });
}

}  // namespace cohort
