// The local workers of one round: starts them through a ProcessSpawner, in one container,
// routes their output, watches them by event (child exit), and stops them all when one fails or
// when asked: the signal, then SIGKILL once the Clock passes the grace period, and every process
// reaped. With hang detection on, every sign of life (a heartbeat on COHORT_HEARTBEAT_FD, an
// output line) moves the worker's deadline (ProgressDeadlines) and one timer waits for the
// earliest; a worker past it is hung: NCCL is asked for every rank's flight-recorder dump and
// the group waits (DumpWatcher, bounded) until they are written, then its stacks are taken
// (SIGABRT: Python's faulthandler prints every thread; eu-stack for native ones) and it counts
// as failed. Once every worker has exited, the container is killed: nothing a worker
// started (in its process group or not) outlives the group. Reports one GroupOutcome. Owned by the
// agent, one per round; io thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/dump_watcher.hpp"
#include "agent/output_config.hpp"
#include "agent/progress_deadlines.hpp"
#include "agent/step_times.hpp"
#include "agent/worker_failure.hpp"
#include "common/clock.hpp"
#include "process/process_spawner.hpp"
#include "process/spawned_child.hpp"
#include "proto/control_messages.hpp"

namespace cohort {

/// Lines of a console stream that contain a filter, also appended to a file every worker of the
/// attempt shares (torchrun's --duplicate-*-filters); no path: none.
struct StreamCopy {
  std::string path;
  std::vector<std::string> filters;
};

struct WorkerPlan {
  int local_rank = 0;
  int rank = 0;
  SpawnRequest request;  ///< stdout/stderr are filled in by the group from the routes
  StreamRoute out, err;
  StreamCopy out_copy, err_copy;
  std::string log_dir;  ///< where stdout.log / stderr.log go when a route has a file
  std::string error_file;
  bool error_file_kept = true;  ///< false: the log directory is removed when the run ends
  std::string prefix;           ///< console line prefix (empty in raw mode)
  std::string hang_file;        ///< where its stacks go if it hangs; empty: nowhere
  std::string nccl_dump_pipe;   ///< its TORCH_NCCL_DEBUG_INFO_PIPE_FILE pipe; empty: none
  std::string nccl_dump_file;   ///< where its flight recorder writes the dump the pipe asks for
  bool python = false;          ///< a Python interpreter: SIGABRT makes it print its stacks
  std::string stack_tool;       ///< eu-stack, for the stacks of a native worker; empty: none
};

struct GroupOutcome {
  enum class Kind { Succeeded, Failed, Stopped };
  Kind kind = Kind::Succeeded;
  /// Workers that failed on their own, first failure first; when there are any, followed by
  /// those of `after_stop`.
  std::vector<WorkerFailure> failures;
  /// Workers that exited with a failing code of their own after cohort asked them to stop: not a
  /// failure of this round, but maybe the same one another node's report restarted it for.
  std::vector<WorkerFailure> after_stop;
};

class WorkerGroup {
 public:
  using Done = std::function<void(GroupOutcome)>;

  WorkerGroup(boost::asio::io_context& io, Clock& clock, ProcessSpawner& spawner,
              std::chrono::milliseconds grace, HangSettings hang = {});
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  /// Starts every worker; `done` is posted once all have exited and their output is drained.
  void start(std::vector<WorkerPlan> plans, Done done);
  /// Sends `signal` to every live worker's process group and carries on.
  void forward_signal(int signal);
  /// Ctrl-Z: stops every live worker's process group (SIGSTOP), and freezes the group's cgroup
  /// (what the workers started in sessions of their own too), until continue_after_pause().
  void pause();
  /// Continues the workers (SIGCONT) after the agent was stopped with them for `paused`: their
  /// hang deadlines move that much later.
  void continue_after_pause(SteadyDuration paused);
  /// Sends `signal`, then SIGKILL (to the container too) after the grace period. The outcome is
  /// Stopped unless a worker had already failed. A second call kills at once.
  void stop(int signal);
  bool stopping() const { return stopping_; }
  /// Stops the worker `pid` with `signal` because a FileTimer scope it set expired; it counts
  /// as failed, with `why` in the summary. False when no live worker has that pid.
  bool expire_timer(pid_t pid, int signal, const std::string& why);
  /// True while `pid` is one of this group's workers, alive.
  bool runs(pid_t pid) const;
  /// The progress of every worker still running (or stopped by the group) now, as the agent
  /// reports it to the daemon: how long it has been silent, its last step, its median step time.
  std::vector<proto::RankProgress> progress() const;
  /// Every worker's pid, started or ended (the GPU health check looks for them after the round).
  std::vector<pid_t> pids() const;
  /// The ranks' flight-recorder dumps on disk now (PyTorch's watchdog writes them by itself on a
  /// collective timeout), each taken as complete.
  std::vector<FlightRecorderDump> dumps_on_disk() const;

  /// Who hears of the flight-recorder dumps: when one of this group's workers is declared hung
  /// (its dumps are being asked for), and when a dump wait ends (its own, or one ask_for_dumps()
  /// started), with the dumps asked and what was found.
  struct DumpListener {
    std::function<void()> hang_declared;
    std::function<void(const std::vector<FlightRecorderDump>&)> dumps_taken;
  };
  void set_dump_listener(DumpListener listener) { listener_ = std::move(listener); }
  /// Another node's worker hung: asks every rank here for its dump now, unless they were asked
  /// already; dumps_taken hears the outcome. False when the group stops without having asked:
  /// no dumps will come.
  bool ask_for_dumps();

 private:
  struct Worker;
  /// The live worker with this pid; null when none is.
  Worker* live_worker(pid_t pid) const;

  void start_worker(Worker& worker);
  int open_stream(Worker& worker, const StreamRoute& route, const StreamCopy& copy, int console_fd,
                  const char* file, SpawnedChild::Stream stream);
  void on_exit(Worker& worker, ExitStatus status);
  void record_failure(Worker& worker, ExitStatus status);
  void on_progress(Worker& worker, std::optional<int64_t> step);
  void arm_hang_timer();
  void arm_grace_timer();
  void on_hang_timer();
  void declare_hang(Worker& worker);
  void ask_for_dumps(Worker& worker);
  void start_dump_wait();
  static uint64_t dump_file_bytes(const Worker& worker);
  void dump_wait_ended(std::vector<FlightRecorderDump> dumps);
  void cut_dump_wait_short();
  void take_stacks(Worker& worker);
  bool take_native_stacks(Worker& worker);
  void abort_hung(Worker& worker);
  void after_abort_wait(Timer::Callback step);
  void arm_hang_step();
  void postpone_hang(SteadyDuration paused);
  void save_stacks(const Worker& worker, WorkerFailure& failure) const;
  void kill_all();
  void maybe_finish();
  void finish();

  boost::asio::io_context& io_;
  ProcessSpawner& spawner_;
  std::chrono::milliseconds grace_;
  Clock& clock_;
  ProgressDeadlines progress_;
  std::vector<StepTimes> step_times_;  ///< by worker index
  std::unique_ptr<Timer> hang_timer_;  ///< at the earliest deadline; after a hang, the abort wait
  std::optional<SteadyTime> hang_step_at_;  ///< after a hang: when the hung worker's next step is
  Timer::Callback hang_step_;               ///< due (SIGABRT once its stacks are taken, SIGKILL)
  std::unique_ptr<Timer> grace_timer_;
  std::optional<SteadyTime> grace_deadline_;  ///< while stopping: when the workers get SIGKILL
  bool workers_may_be_stopped_ = false;       ///< a stop signal was forwarded, no SIGCONT since
  std::unique_ptr<Timer> drain_timer_;
  DumpWatcher dump_watcher_;
  Worker* dump_waiter_ = nullptr;  ///< the hung worker whose stacks wait for the NCCL dumps
  DumpListener listener_;
  bool dump_asked_ = false;  ///< the ranks' dumps were asked for (once per round)
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<WorkerFailure> failures_;
  std::vector<size_t> failed_workers_;  ///< index into workers_, parallel to failures_
  Done done_;
  int container_ = 0;              ///< the spawner's, for every worker's SpawnRequest
  bool container_killed_ = false;  ///< once every worker has exited
  bool stopping_ = false;
  bool progress_frozen_ = false;  ///< a hang was declared, or the group stops: signals ignored
  bool finished_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cohort
