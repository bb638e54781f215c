#include "agent/worker_group.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <climits>
#include <csignal>
#include <cstring>
#include <utility>

#include "agent/error_file.hpp"
#include "agent/hang_report.hpp"
#include "agent/heartbeat_channel.hpp"
#include "common/console.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "common/untrusted_file.hpp"

namespace cohort {

struct WorkerGroup::Worker {
  explicit Worker(boost::asio::io_context& io) : child(io) {}

  WorkerPlan plan;
  size_t index = 0;
  SpawnedChild child;
  std::deque<std::string> spawn_error;
  std::shared_ptr<HeartbeatChannel> heartbeat;
  std::optional<HangReport> hang;  ///< declared hung; stopped with SIGABRT
  std::string timer_expired;       ///< stopped for an expired FileTimer scope
  SteadyTime hang_declared{};
  SteadyTime started{};
  std::optional<FileStamp> dump_before;  ///< what was at plan.nccl_dump_file before it started
  bool native_stacks = false;            ///< eu-stack wrote them to plan.hang_file
  bool aborted = false;                  ///< SIGABRT sent
  bool ended_on_its_own = false;         ///< exited before a hang was declared or the group stopped
};

namespace {

constexpr std::chrono::seconds kDrainTimeout{2};
/// How long a hung worker has, after SIGABRT, to print its stacks and die before SIGKILL.
constexpr std::chrono::seconds kAbortWait{5};
constexpr const char* kHeartbeatVariable = "COHORT_HEARTBEAT_FD";
/// The most of eu-stack's output read back for a hang's innermost frames.
constexpr size_t kMaxStacksBytes = 16 << 20;

void set_variable(std::vector<std::string>& env, const std::string& name,
                  const std::string& value) {
  std::string prefix = name + "=";
  std::erase_if(env, [&](const std::string& entry) { return entry.rfind(prefix, 0) == 0; });
  env.push_back(prefix + value);
}

/// How much of the end of a worker's stderr.log its failure's tail is read from, and how long a
/// line of it may be.
constexpr size_t kStderrTailBytes = 64 * 1024;
constexpr size_t kTailLineBytes = 1024;

// The last `count` lines of a worker's stderr.log, each cut to kTailLineBytes. The worker may have
// made it anything (a sparse terabyte, a FIFO, /dev/zero): only its last kStderrTailBytes of a
// regular file are read, and a line cut by that start is dropped unless it is all there is. NUL
// bytes (a hole) are no text: they are left out.
std::vector<std::string> read_last_lines(const std::string& path, size_t count) {
  UntrustedRead tail = read_untrusted_file_tail(path, kStderrTailBytes);
  if (!tail.ok) return {};
  bool starts_cut = tail.file_bytes > tail.bytes.size();
  tail.bytes.erase(std::remove(tail.bytes.begin(), tail.bytes.end(), '\0'), tail.bytes.end());
  std::vector<std::string> lines = split(tail.bytes, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the last line's newline
  if (starts_cut && lines.size() > 1) lines.erase(lines.begin());
  if (lines.size() > count) lines.erase(lines.begin(), lines.end() - static_cast<long>(count));
  for (auto& line : lines) line.resize(std::min(line.size(), kTailLineBytes));
  return lines;
}

int open_log_file(const std::string& path) { return open_untrusted_for_writing(path, O_APPEND); }

// Why a worker's files under `dir` may be cut short: their filesystem has no space (or no inodes)
// left; empty when it has, or cannot be asked.
std::string full_filesystem_note(const std::string& dir) {
  struct statvfs fs {};
  if (dir.empty() || ::statvfs(dir.c_str(), &fs) != 0) return {};
  bool no_space = fs.f_bavail == 0;
  bool no_inodes = fs.f_files > 0 && fs.f_favail == 0;
  if (!no_space && !no_inodes) return {};
  return cat("the filesystem of ", dir, " is full (no ", no_space ? "space" : "inodes",
             " left): the worker's output files and error file may be cut short or missing");
}

}  // namespace

WorkerGroup::WorkerGroup(boost::asio::io_context& io, Clock& clock, ProcessSpawner& spawner,
                         std::chrono::milliseconds grace, HangSettings hang)
    : io_(io),
      spawner_(spawner),
      grace_(grace),
      clock_(clock),
      progress_(hang),
      hang_timer_(clock.make_timer()),
      grace_timer_(clock.make_timer()),
      drain_timer_(clock.make_timer()),
      dump_watcher_(clock) {}

WorkerGroup::~WorkerGroup() {
  *alive_ = false;
  for (auto& worker : workers_) {
    if (worker->heartbeat) worker->heartbeat->close();
  }
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
  step_times_.resize(workers_.size());
  for (auto& worker : workers_) {
    if (stopping_) {  // an earlier worker could not start: do not start the rest
      worker->child.never_ran(ExitStatus::killed_by(SIGKILL));
      continue;
    }
    start_worker(*worker);
  }
  arm_hang_timer();
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
  bool watched = progress_.settings().enabled();  // output is a sign of life: it must be read
  if (!route.console) {
    if (!watched && file_fd >= 0) return worker.child.for_child(file_fd);
    if (!watched) return worker.child.for_child(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    console_fd = -1;
  }
  // Raw console: inherit the agent's stream.
  if (plan.prefix.empty() && file_fd < 0 && !watched) return -1;
  PumpTarget target{console_fd, file_fd, plan.prefix};
  if (file_fd >= 0) target.file_path = plan.log_dir + "/" + file;
  if (!copy.path.empty() && !copy.filters.empty()) {
    target.copy_fd = open_log_file(copy.path);
    target.copy_path = copy.path;
    if (target.copy_fd < 0) log::warn("cannot open ", copy.path, ": ", std::strerror(errno));
    target.copy_filters = copy.filters;
  }
  int copy_fd = target.copy_fd;
  if (watched) target.on_output = [this, &worker] { on_progress(worker, std::nullopt); };
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
  worker.dump_before = file_stamp(worker.plan.nccl_dump_file);
  SpawnRequest& request = worker.plan.request;
  request.container = container_;
  request.stdout_fd = open_stream(worker, worker.plan.out, worker.plan.out_copy, STDOUT_FILENO,
                                  "stdout.log", SpawnedChild::Stream::Out);
  request.stderr_fd = open_stream(worker, worker.plan.err, worker.plan.err_copy, STDERR_FILENO,
                                  "stderr.log", SpawnedChild::Stream::Err);
  worker.heartbeat = std::make_shared<HeartbeatChannel>(io_);
  if (worker.heartbeat->write_fd() >= 0) {
    request.inherit_fds = {worker.heartbeat->write_fd()};
    set_variable(request.env, kHeartbeatVariable, std::to_string(worker.heartbeat->write_fd()));
  }

  SpawnedChild::Events events{[this, &worker](ExitStatus status) { on_exit(worker, status); },
                              [this] { maybe_finish(); }};
  std::error_code error;
  if (!worker.child.spawn(spawner_, request, std::move(events), error)) {
    std::string message =
        cat("cohort: cannot execute '", request.executable, "': ", error.message());
    console::write_message(STDERR_FILENO, message + "\n");
    worker.spawn_error.push_back(message);
    worker.child.never_ran(ExitStatus::exited(127));
    record_failure(worker, ExitStatus::exited(127));
    stop(SIGTERM);
    return;
  }
  worker.heartbeat->close_write_end();
  worker.heartbeat->start(
      [this, &worker](std::optional<int64_t> step) { on_progress(worker, step); });
  worker.started = clock_.now();
  progress_.started(worker.index, worker.started);
  log::debug("started worker local_rank=", worker.plan.local_rank, " rank=", worker.plan.rank,
             " pid=", worker.child.pid());
}

// The size of the worker's dump file; 0 when there is none, or none written since it started.
uint64_t WorkerGroup::dump_file_bytes(const Worker& worker) {
  return fresh_file_bytes(worker.plan.nccl_dump_file, worker.dump_before).value_or(0);
}

void WorkerGroup::on_exit(Worker& worker, ExitStatus status) {
  if (dump_waiter_ == &worker) cut_dump_wait_short();
  spawner_.signal_group(worker.child.pid(), SIGKILL);  // whatever the worker left in its group
  log::debug("worker local_rank=", worker.plan.local_rank, " pid=", worker.child.pid(),
             " ended with ", status.describe());
  progress_.forget(worker.index);
  worker.ended_on_its_own = !progress_frozen_;
  // A worker cohort stopped (hung, or its FileTimer ran out) failed, even if others failed first.
  bool stopped_by_cohort = worker.hang || !worker.timer_expired.empty();
  if (!status.success() && (!stopping_ || stopped_by_cohort)) {
    record_failure(worker, status);
    if (!stopping_) stop(SIGTERM);
  } else if (!status.success() && !status.signaled) {
    record_failure(worker, status);  // past the stop: its own exit code, maybe its own failure
    failures_.back().after_stop = true;
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
  if (worker.hang) {  // it failed when it was found hung, before the others were stopped
    failure.time -= std::chrono::duration_cast<std::chrono::system_clock::duration>(
        clock_.now() - worker.hang_declared);
  }
  failure.error_file = worker.plan.error_file;
  failure.error_file_kept = worker.plan.error_file_kept;
  failure.hang = worker.hang;
  if (worker.child.pid() > 0) {
    failure.uptime =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now() - worker.started);
  }
  failure.timer_expired = worker.timer_expired;
  failures_.push_back(std::move(failure));
  failed_workers_.push_back(worker.index);
}

// A worker's first sign of life may move its deadline earlier (the first-signal allowance is
// longer than the timeout): the timer follows. Later ones only move deadlines later.
void WorkerGroup::on_progress(Worker& worker, std::optional<int64_t> step) {
  // What a hung or stopped worker prints (its traceback) is no progress. The others' signals
  // while a hang's dumps are gathered are: they did not wait on it, and the daemon hears so.
  if (stopping_ || worker.hang) return;
  SteadyTime now = clock_.now();
  if (step) step_times_.at(worker.index).beat(*step, now);
  if (progress_.signal(worker.index, now, step)) arm_hang_timer();
}

std::vector<pid_t> WorkerGroup::pids() const {
  std::vector<pid_t> pids;
  for (const auto& worker : workers_) {
    if (worker->child.pid() > 0) pids.push_back(worker->child.pid());
  }
  return pids;
}

// PyTorch's watchdog writes a rank's dump by itself when a collective times out
// (TORCH_NCCL_DUMP_ON_TIMEOUT): what is on disk now, asked for or not.
std::vector<FlightRecorderDump> WorkerGroup::dumps_on_disk() const {
  std::vector<FlightRecorderDump> dumps;
  for (const auto& worker : workers_) {
    uint64_t bytes = dump_file_bytes(*worker);
    if (bytes > 0) {
      dumps.push_back(
          {worker->plan.rank, worker->plan.nccl_dump_file, bytes, true, worker->dump_before});
    }
  }
  return dumps;
}

std::vector<proto::RankProgress> WorkerGroup::progress() const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  std::vector<proto::RankProgress> ranks;
  SteadyTime now = clock_.now();
  for (const auto& worker : workers_) {
    // Never started, or done before the group stopped: it waits on nobody.
    if (worker->child.pid() <= 0 || worker->ended_on_its_own) continue;
    proto::RankProgress rank;
    rank.local_rank = worker->plan.local_rank;
    rank.silent_ms = duration_cast<milliseconds>(progress_.silent_for(worker->index, now)).count();
    if (auto step = progress_.record(worker->index).step) {
      rank.step = static_cast<int>(std::clamp<int64_t>(*step, 0, INT32_MAX));
    }
    if (auto median = step_times_.at(worker->index).median()) {
      // Within what the daemon accepts, whatever the worker's counts made of it.
      rank.step_ms = std::clamp<int64_t>(duration_cast<milliseconds>(*median).count(), 0,
                                         proto::kMaxDurationMs);
    }
    ranks.push_back(rank);
  }
  return ranks;
}

// One timer for the group, at the earliest deadline. Signals after a worker's first only move
// deadlines later, so it is not re-armed for each: when it fires early it finds nobody hung and
// waits for the new earliest.
void WorkerGroup::arm_hang_timer() {
  if (stopping_) return;
  if (auto due = progress_.next_deadline())
    hang_timer_->start_at(*due, [this] { on_hang_timer(); });
}

void WorkerGroup::on_hang_timer() {
  if (stopping_) return;
  auto hung = progress_.first_hung(clock_.now());
  if (!hung) return arm_hang_timer();
  declare_hang(*workers_[*hung]);
}

// Asks for the NCCL flight recorder's dumps, waits for them, takes the hung worker's stacks, then
// stops it with SIGABRT; its exit is the group's failure. SIGKILL if it is still there after
// kAbortWait.
void WorkerGroup::declare_hang(Worker& worker) {
  SteadyTime now = clock_.now();
  HangReport hang;
  const ProgressRecord& record = progress_.record(worker.index);
  hang.silent_for = std::chrono::duration_cast<std::chrono::milliseconds>(
      progress_.silent_for(worker.index, now));
  hang.step = record.step;
  if (record.last_signal) {
    hang.last_signal =
        std::chrono::system_clock::now() -
        std::chrono::duration_cast<std::chrono::system_clock::duration>(now - *record.last_signal);
  }
  worker.hang = hang;
  worker.hang_declared = now;
  progress_.forget_all();
  progress_frozen_ = true;
  log::warn("worker rank=", worker.plan.rank, " pid=", worker.child.pid(), " made no progress for ",
            hang.silent_for.count() / 1000.0, " s: taking its stacks and stopping it");
  ask_for_dumps(worker);
}

// Asks every rank that made a debug-info pipe for its flight-recorder dump, and takes the hung
// worker's stacks once the dumps are written (or --hang-dump-timeout has passed): stopping it
// sooner would lose them. A wait another node's hang started serves as well.
void WorkerGroup::ask_for_dumps(Worker& worker) {
  SteadyDuration timeout = progress_.settings().dump_timeout;
  worker.hang->dump_wait = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  worker.hang->dumps_kept = worker.plan.error_file_kept;
  if (listener_.hang_declared) listener_.hang_declared();
  dump_waiter_ = &worker;
  if (!dump_watcher_.waiting()) start_dump_wait();
}

bool WorkerGroup::ask_for_dumps() {
  if (dump_asked_) return true;  // reported when the wait ends, or was already
  if (stopping_) return false;
  start_dump_wait();
  return true;
}

// Writes every rank's dump pipe and waits for the dumps (nothing asked: done at once). A rank
// without a pipe (or no longer running) whose dump is on disk already (PyTorch's watchdog wrote
// it) is waited for too, until its size holds.
void WorkerGroup::start_dump_wait() {
  dump_asked_ = true;
  std::vector<FlightRecorderDump> asked;
  for (auto& each : workers_) {
    bool requested = !each->child.status() && request_nccl_dump(each->plan.nccl_dump_pipe);
    if (requested || dump_file_bytes(*each) > 0)
      asked.push_back({each->plan.rank, each->plan.nccl_dump_file, {}, false, each->dump_before});
  }
  SteadyDuration timeout = progress_.settings().dump_timeout;
  if (asked.empty() || timeout <= SteadyDuration::zero()) return dump_wait_ended({});
  log::info("waiting up to ", std::chrono::duration<double>(timeout).count(), " s for ",
            asked.size(), " NCCL flight-recorder dump(s)");
  dump_watcher_.start(std::move(asked), timeout, [this](std::vector<FlightRecorderDump> dumps) {
    dump_wait_ended(std::move(dumps));
  });
}

void WorkerGroup::dump_wait_ended(std::vector<FlightRecorderDump> dumps) {
  if (listener_.dumps_taken) listener_.dumps_taken(dumps);
  Worker* waiter = std::exchange(dump_waiter_, nullptr);
  if (!waiter) return;
  waiter->hang->dumps = std::move(dumps);
  take_stacks(*waiter);
}

// The group stops (or the hung worker ended) while the dumps are awaited: what is there now.
void WorkerGroup::cut_dump_wait_short() {
  if (!dump_watcher_.waiting()) return;
  std::vector<FlightRecorderDump> dumps = dump_watcher_.cut_short();
  if (listener_.dumps_taken) listener_.dumps_taken(dumps);
  if (Worker* waiter = std::exchange(dump_waiter_, nullptr)) waiter->hang->dumps = dumps;
}

void WorkerGroup::take_stacks(Worker& worker) {
  if (const auto& err = worker.child.pump(SpawnedChild::Stream::Err)) err->start_capture();
  if (!worker.plan.python && take_native_stacks(worker)) return;  // SIGABRT once they are taken
  abort_hung(worker);
}

// eu-stack -p PID into the worker's hang file; the worker is stopped when it is done (or after
// kAbortWait, should it take longer). False when it cannot be run.
bool WorkerGroup::take_native_stacks(Worker& worker) {
  if (worker.plan.stack_tool.empty() || worker.plan.hang_file.empty()) return false;
  int fd = open_untrusted_for_writing(worker.plan.hang_file, O_TRUNC);
  if (fd < 0) return false;
  SpawnRequest request;
  request.executable = worker.plan.stack_tool;
  request.args = {"-p", std::to_string(worker.child.pid())};
  request.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  request.stdout_fd = request.stderr_fd = fd;
  Worker* hung = &worker;
  std::error_code error;
  pid_t tool = spawner_.spawn(
      request,
      [this, hung, alive = alive_](ExitStatus) {
        if (*alive) abort_hung(*hung);
      },
      error);
  ::close(fd);
  if (tool < 0) return false;
  worker.native_stacks = true;
  after_abort_wait([this, hung] { abort_hung(*hung); });
  return true;
}

// SIGABRT to the hung worker (Python prints every thread's traceback); SIGKILL to its group if
// it is still there after kAbortWait.
void WorkerGroup::abort_hung(Worker& worker) {
  if (worker.aborted || worker.child.status()) return;
  worker.aborted = true;
  spawner_.signal_process(worker.child.pid(), SIGABRT);
  pid_t group = worker.child.pid();
  after_abort_wait([this, group] { spawner_.signal_group(group, SIGKILL); });
}

// The hung worker's next step, kAbortWait from now, on the hang timer; remembered, so that a
// pause can move it.
void WorkerGroup::after_abort_wait(Timer::Callback step) {
  hang_step_at_ = clock_.now() + kAbortWait;
  hang_step_ = std::move(step);
  arm_hang_step();
}

void WorkerGroup::arm_hang_step() {
  hang_timer_->start_at(*hang_step_at_, [this] {
    hang_step_at_.reset();
    std::exchange(hang_step_, nullptr)();
  });
}

// Ctrl-Z during a hang's handling: the waits for the dumps and for the hung worker to go get
// what was left of them (the ranks were stopped too, and could not write or print meanwhile).
void WorkerGroup::postpone_hang(SteadyDuration paused) {
  dump_watcher_.postpone(paused);
  if (!hang_step_at_) return;
  *hang_step_at_ += paused;
  arm_hang_step();
}

// Saves what the hung worker printed once stopped (its traceback) next to its logs, and quotes
// where it was stuck.
void WorkerGroup::save_stacks(const Worker& worker, WorkerFailure& failure) const {
  HangReport& hang = *failure.hang;
  const auto& err = worker.child.pump(SpawnedChild::Stream::Err);
  std::string printed = err ? err->captured() : std::string();
  if (worker.native_stacks) {  // eu-stack's, in the file already; then what the worker printed
    hang.frames =
        innermost_frames(read_untrusted_file(worker.plan.hang_file, kMaxStacksBytes).bytes);
    write_untrusted_file(worker.plan.hang_file, printed, O_APPEND);
    hang.stacks_file = worker.plan.hang_file;
    return;
  }
  hang.frames = innermost_frames(printed);
  if (printed.empty()) {
    hang.note = worker.plan.python
                    ? "none printed (Python prints every thread's traceback on SIGABRT with "
                      "PYTHONFAULTHANDLER=1, which cohort sets unless you did)"
                    : "install elfutils (eu-stack) to have cohort take a native worker's stacks";
    return;
  }
  if (worker.plan.hang_file.empty()) return;
  if (write_untrusted_file(worker.plan.hang_file, printed, O_TRUNC)) {
    hang.stacks_file = worker.plan.hang_file;
  }
}

void WorkerGroup::forward_signal(int signal) {
  if (signal == SIGTSTP || signal == SIGSTOP || signal == SIGTTIN || signal == SIGTTOU)
    workers_may_be_stopped_ = true;
  if (signal == SIGCONT) workers_may_be_stopped_ = false;
  for (auto& worker : workers_) {
    if (!worker->child.status() && worker->child.pid() > 0)
      spawner_.signal_group(worker->child.pid(), signal);
  }
}

void WorkerGroup::pause() {
  forward_signal(SIGSTOP);
  spawner_.freeze_container(container_, true);
}

void WorkerGroup::continue_after_pause(SteadyDuration paused) {
  spawner_.freeze_container(container_, false);
  forward_signal(SIGCONT);
  if (grace_deadline_) {  // stopping: the workers get the rest of their grace period
    *grace_deadline_ += paused;
    arm_grace_timer();
  }
  if (progress_frozen_) return postpone_hang(paused);  // a hang was declared, or the group stops
  progress_.postpone(paused);
  arm_hang_timer();
}

WorkerGroup::Worker* WorkerGroup::live_worker(pid_t pid) const {
  for (const auto& worker : workers_) {
    if (worker->child.pid() == pid && !worker->child.status()) return worker.get();
  }
  return nullptr;
}

bool WorkerGroup::runs(pid_t pid) const { return live_worker(pid) != nullptr; }

bool WorkerGroup::expire_timer(pid_t pid, int signal, const std::string& why) {
  Worker* worker = live_worker(pid);
  if (worker == nullptr) return false;
  if (worker->timer_expired.empty()) worker->timer_expired = why;
  spawner_.signal_process(pid, signal);
  return true;
}

void WorkerGroup::stop(int signal) {
  hang_timer_->cancel();  // no more hangs to find, nor a hung worker's abort to wait for
  hang_step_at_.reset();
  cut_dump_wait_short();
  progress_frozen_ = true;
  if (stopping_ || signal == SIGKILL) {
    stopping_ = true;
    return kill_all();
  }
  stopping_ = true;
  forward_signal(signal);
  // A worker stopped by a forwarded SIGTSTP takes its signal only once continued (as a shell's
  // kill does for a stopped job).
  if (workers_may_be_stopped_) forward_signal(SIGCONT);
  grace_deadline_ = clock_.now() + grace_;
  arm_grace_timer();
}

void WorkerGroup::arm_grace_timer() {
  grace_timer_->start_at(*grace_deadline_, [this] {
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
  grace_deadline_.reset();
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
    failure.files_cut = full_filesystem_note(worker.plan.log_dir);
    if (failure.hang) save_stacks(worker, failure);
    (failure.after_stop ? outcome.after_stop : outcome.failures).push_back(std::move(failure));
  }
  if (!outcome.failures.empty()) {
    outcome.kind = GroupOutcome::Kind::Failed;
    // Every worker that failed is listed, as torchrun lists them: those that exited with a code
    // of their own after the stop too (marked so), after the root cause.
    outcome.failures.insert(outcome.failures.end(), outcome.after_stop.begin(),
                            outcome.after_stop.end());
  } else if (stopping_)
    outcome.kind = GroupOutcome::Kind::Stopped;
  boost::asio::post(
      io_, [done = std::move(done_), outcome = std::move(outcome), alive = alive_]() mutable {
        if (*alive) done(std::move(outcome));
      });
}

}  // namespace cohort
