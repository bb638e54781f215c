#include "agent/worker_group.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <csignal>
#include <cstring>
#include <fstream>

#include "agent/error_file.hpp"
#include "common/log.hpp"

namespace cohort {

struct WorkerGroup::Worker {
  WorkerPlan plan;
  pid_t pid = -1;
  std::optional<ExitStatus> status;
  size_t index = 0;
  std::shared_ptr<OutputPump> out_pump, err_pump;
  int open_pumps = 0;
  std::vector<int> owned_fds;   ///< log files and child-side pipe ends, closed when done
  std::vector<int> pump_files;  ///< log files a pump writes (--tee): open as long as the worker
  std::deque<std::string> spawn_error;

  ~Worker() {
    for (int fd : owned_fds) ::close(fd);
    for (int fd : pump_files) ::close(fd);
  }
  void close_pumps() {
    if (out_pump) out_pump->close();
    if (err_pump) err_pump->close();
  }
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

WorkerGroup::WorkerGroup(boost::asio::io_context& io, ChildReaper& reaper, GroupKeeper& keeper,
                         std::chrono::milliseconds grace)
    : io_(io),
      reaper_(reaper),
      keeper_(keeper),
      grace_(grace),
      grace_timer_(io),
      drain_timer_(io) {}

WorkerGroup::~WorkerGroup() {
  *alive_ = false;
  for (auto& worker : workers_) {
    if (!worker->status && worker->pid > 0) ::kill(-worker->pid, SIGKILL);
    worker->close_pumps();
  }
}

void WorkerGroup::start(std::vector<WorkerPlan> plans, Done done) {
  done_ = std::move(done);
  for (auto& plan : plans) {
    workers_.push_back(std::make_unique<Worker>());
    workers_.back()->plan = std::move(plan);
    workers_.back()->index = workers_.size() - 1;
  }
  for (auto& worker : workers_) {
    if (stopping_) {  // an earlier worker could not start: do not start the rest
      worker->status = ExitStatus::killed_by(SIGKILL);
      continue;
    }
    start_worker(*worker);
  }
  maybe_finish();
}

// Returns the fd the child gets for one stream, and sets up a pump when the agent must read it.
int WorkerGroup::open_stream(Worker& worker, const StreamRoute& route, int console_fd,
                             const char* file, std::shared_ptr<OutputPump>& pump) {
  const WorkerPlan& plan = worker.plan;
  int file_fd = -1;
  if (route.file) {
    file_fd = open_log_file(plan.log_dir + "/" + file);
    if (file_fd < 0)
      log::warn("cannot open ", plan.log_dir, "/", file, ": ", std::strerror(errno));
    else
      worker.owned_fds.push_back(file_fd);
  }
  if (!route.console) {
    if (file_fd >= 0) return file_fd;
    int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    worker.owned_fds.push_back(null_fd);
    return null_fd;
  }
  if (plan.prefix.empty() && file_fd < 0) return -1;  // raw console: inherit the agent's stream
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  worker.owned_fds.push_back(fds[1]);
  if (file_fd >= 0) {  // the pump writes it after the spawn, when owned_fds are closed
    std::erase(worker.owned_fds, file_fd);
    worker.pump_files.push_back(file_fd);
  }
  pump = std::make_shared<OutputPump>(io_, fds[0], PumpTarget{console_fd, file_fd, plan.prefix});
  return fds[1];
}

void WorkerGroup::start_worker(Worker& worker) {
  SpawnRequest& request = worker.plan.request;
  request.announce_group_fd = keeper_.announce_fd();  // known to the keeper before it runs
  request.stdout_fd =
      open_stream(worker, worker.plan.out, STDOUT_FILENO, "stdout.log", worker.out_pump);
  request.stderr_fd =
      open_stream(worker, worker.plan.err, STDERR_FILENO, "stderr.log", worker.err_pump);

  std::error_code error;
  worker.pid = spawn_process(io_.get_executor(), request, error);
  for (int fd : worker.owned_fds) ::close(fd);  // the child has its copies; log files reopen
  worker.owned_fds.clear();
  if (worker.pid < 0) {
    std::string message =
        cat("cohort: cannot execute '", request.executable, "': ", error.message());
    write_all(STDERR_FILENO, message + "\n");
    worker.close_pumps();
    worker.out_pump.reset();
    worker.err_pump.reset();
    worker.spawn_error.push_back(message);
    worker.pid = 0;
    record_failure(worker, ExitStatus::exited(127));
    worker.status = ExitStatus::exited(127);
    stop(SIGTERM);
    return;
  }
  keeper_.add(worker.pid);
  reaper_.watch(worker.pid, [this, &worker, alive = alive_](ExitStatus status) {
    if (*alive) on_exit(worker, status);
  });
  for (auto* pump : {&worker.out_pump, &worker.err_pump}) {
    if (!*pump) continue;
    ++worker.open_pumps;
    (*pump)->start([this, &worker, alive = alive_] {
      if (!*alive) return;
      --worker.open_pumps;
      maybe_finish();
    });
  }
  log::debug("started worker local_rank=", worker.plan.local_rank, " rank=", worker.plan.rank,
             " pid=", worker.pid);
}

void WorkerGroup::on_exit(Worker& worker, ExitStatus status) {
  worker.status = status;
  ::kill(-worker.pid, SIGKILL);  // whatever the worker left behind in its group
  keeper_.remove(worker.pid);
  log::debug("worker local_rank=", worker.plan.local_rank, " pid=", worker.pid, " ended with ",
             status.describe());
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
  failure.pid = worker.pid;
  failure.status = status;
  failure.time = std::chrono::system_clock::now();
  failure.error_file = worker.plan.error_file;
  failures_.push_back(std::move(failure));
  failed_workers_.push_back(worker.index);
}

void WorkerGroup::forward_signal(int signal) {
  for (auto& worker : workers_) {
    if (!worker->status && worker->pid > 0) ::kill(-worker->pid, signal);
  }
}

void WorkerGroup::stop(int signal) {
  if (stopping_) {
    kill_all(SIGKILL);
    return;
  }
  stopping_ = true;
  forward_signal(signal);
  grace_timer_.expires_after(grace_);
  grace_timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (error || !*alive) return;
    log::warn("workers did not stop within the shutdown timeout: sending SIGKILL");
    kill_all(SIGKILL);
  });
}

void WorkerGroup::kill_all(int signal) {
  kill_sent_ = true;
  forward_signal(signal);
}

std::vector<pid_t> WorkerGroup::pids() const {
  std::vector<pid_t> result;
  for (const auto& worker : workers_) result.push_back(worker->pid);
  return result;
}

void WorkerGroup::maybe_finish() {
  if (finished_) return;
  bool all_exited = true, all_drained = true;
  for (const auto& worker : workers_) {
    all_exited = all_exited && worker->status.has_value();
    all_drained = all_drained && worker->open_pumps == 0;
  }
  if (!all_exited) return;
  grace_timer_.cancel();
  if (all_drained) return finish();
  // Exited, but something (an escaped grandchild) still holds a pipe: wait a little, then give up.
  drain_timer_.expires_after(kDrainTimeout);
  drain_timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (error || !*alive) return;
    for (auto& worker : workers_) worker->close_pumps();
  });
}

void WorkerGroup::finish() {
  finished_ = true;
  drain_timer_.cancel();
  GroupOutcome outcome;
  for (size_t i = 0; i < failures_.size(); ++i) {
    WorkerFailure failure = failures_[i];
    const Worker& worker = *workers_[failed_workers_[i]];
    if (worker.err_pump) {
      const auto& tail = worker.err_pump->tail();
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
