#include "process/posix_process_spawner.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "common/fd_limit.hpp"
#include "common/log.hpp"
#include "common/stop_signals.hpp"
#include "process/fork_exec.hpp"

namespace cohort {

namespace {

// Writes "+<pid>\n" in one write (atomic on a pipe), without the heap: runs between fork and exec.
void announce_group(int fd) {
  char line[24];
  char* end = line + sizeof line;
  char* at = end;
  *--at = '\n';
  for (long pid = ::getpid(); pid > 0; pid /= 10) *--at = static_cast<char>('0' + pid % 10);
  *--at = '+';
  while (::write(fd, at, static_cast<size_t>(end - at)) < 0 && errno == EINTR) {
  }
}

// Marks every descriptor from `first` on close-on-exec, so that the worker gets none of the
// agent's sockets, pipes and files (fork_exec's error pipe among them where it forks, which must
// stay open until exec). Runs between the child's start and exec.
void close_on_exec_from(int first) {
  if (::close_range(static_cast<unsigned>(first), ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  rlimit limit{};  // kernels before 5.11: one descriptor at a time
  rlim_t last = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 1024;
  if (last > (1u << 20)) last = 1u << 20;
  for (int fd = first; static_cast<rlim_t>(fd) < last; ++fd) {
    int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

// What a worker's child does between fork and exec: joins its cgroup when it was not born in it,
// makes its process group (announced to the keeper), sets the parent-death signal, the signal
// state, the working directory and the three streams, then applies its CPU binding. Returns 0 or
// the errno that stops the spawn.
struct WorkerSetup {
  const SpawnRequest& request;
  pid_t parent_pid;
  int announce_fd;  ///< a GroupKeeper's pipe, or -1
  int cgroup_fd;    ///< the cgroup.procs of the container's cgroup to write to, or -1
  PreparedBinding binding;

  int operator()() const {
    // First of all, so that everything the child ever starts is in the cgroup. Should it fail
    // (it did not for the probe child), the orphan sweep is all there is for this one.
    if (cgroup_fd >= 0) {
      while (::write(cgroup_fd, "0", 1) < 0 && errno == EINTR) {
      }
    }
    if (request.new_process_group) {
      if (::setpgid(0, 0) != 0) return errno;
      if (announce_fd >= 0) announce_group(announce_fd);
    }
    if (request.die_with_parent) {
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return errno;
      if (::getppid() != parent_pid) ::_exit(127);  // the parent died before prctl took effect
    }
    // Signals the agent ignores must not stay so in the worker, but for nohup's ignored SIGHUP,
    // which the user asked for the whole job. (fork_exec then puts back every caught signal's
    // default and unblocks them all.)
    bool keep_hangup_ignored = hangup_ignored();
    for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGCHLD}) {
      if (signal != SIGHUP || !keep_hangup_ignored) ::signal(signal, SIG_DFL);
    }
    if (!request.working_dir.empty() && ::chdir(request.working_dir.c_str()) != 0) return errno;
    int in = request.stdin_fd;
    if (in < 0) in = ::open("/dev/null", O_RDONLY);
    if (in < 0 || ::dup2(in, STDIN_FILENO) < 0) return errno;
    if (request.stdout_fd >= 0 && ::dup2(request.stdout_fd, STDOUT_FILENO) < 0) return errno;
    if (request.stderr_fd >= 0 && ::dup2(request.stderr_fd, STDERR_FILENO) < 0) return errno;
    close_on_exec_from(STDERR_FILENO + 1);  // up to the agent's limit, which may be raised
    for (int fd : request.inherit_fds) {    // a heartbeat pipe
      int flags = ::fcntl(fd, F_GETFD);
      if (flags >= 0) ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
    }
    restore_inherited_fd_limit();
    return apply_prepared_binding(binding);
  }
};

}  // namespace

PosixProcessSpawner::PosixProcessSpawner(boost::asio::io_context& io, ChildReaper& reaper,
                                         GroupKeeper* keeper)
    : io_(io), reaper_(reaper), keeper_(keeper) {}

pid_t PosixProcessSpawner::spawn(const SpawnRequest& request, ExitHandler on_exit,
                                 std::error_code& error) {
  bool keep_group = keeper_ && request.new_process_group;
  // The child writes "+<its pid>" to the keeper before exec, so that its group is known before
  // the program can start children of its own. It is born in its container's cgroup, or (on a
  // kernel without clone3's CLONE_INTO_CGROUP) joins it first thing.
  int cgroup_dir_fd = -1, cgroup_procs_fd = -1;
  if (auto found = containers_.find(request.container);
      found != containers_.end() && found->second > 0) {
    if (cgroups_->joins_at_birth()) {
      cgroup_dir_fd = cgroups_->open_directory(found->second);
    } else {
      cgroup_procs_fd = cgroups_->open_procs(found->second);
    }
  }
  WorkerSetup setup{request, ::getpid(), keep_group ? keeper_->announce_fd() : -1, cgroup_procs_fd,
                    prepare_binding(request.binding)};
  pid_t pid = fork_exec(ExecPlan{request.executable, request.args, request.env, request.argv0},
                        cgroup_dir_fd, setup, error);
  for (int fd : {cgroup_dir_fd, cgroup_procs_fd}) {
    if (fd >= 0) ::close(fd);
  }
  if (pid < 0) return -1;
  // The reaper reaps it (and any orphaned grandchild) on SIGCHLD.
  if (!keep_group) {
    reaper_.watch(pid, std::move(on_exit));
    return pid;
  }
  keeper_->add(pid);
  // The handler first (it may kill what is left of the group), then the keeper forgets it.
  reaper_.watch(pid, [keeper = keeper_, pid, on_exit = std::move(on_exit)](ExitStatus status) {
    on_exit(status);
    keeper->remove(pid);
  });
  return pid;
}

void PosixProcessSpawner::signal_group(pid_t group, int signal) { ::kill(-group, signal); }

void PosixProcessSpawner::signal_process(pid_t pid, int signal) { ::kill(pid, signal); }

int PosixProcessSpawner::open_container() {
  if (keeper_ == nullptr) return 0;
  reaper_.stop_killing_orphans();  // those of an earlier container are dead; these are alive
  if (!cgroups_tried_) {
    cgroups_tried_ = true;
    std::string why;
    cgroups_ = WorkerCgroups::create(io_, why);
    if (cgroups_ && !keeper_->contain_in(cgroups_->directory())) {
      why = "the keeper cannot be told where the cgroups are";
      cgroups_.reset();
    }
    if (cgroups_) {
      log::debug("worker groups run in cgroups under ", cgroups_->directory());
    } else {
      log::debug("worker groups run without a cgroup (", why,
                 "): what they leave behind is found as orphans of this subreaper");
    }
  }
  int container = ++next_container_;
  containers_[container] = cgroups_ ? cgroups_->make_group() : 0;
  return container;
}

void PosixProcessSpawner::kill_container(int container) {
  auto found = containers_.find(container);
  if (found == containers_.end()) return;
  if (found->second > 0) cgroups_->kill(found->second);
  // Also with a cgroup: one that a worker failed to join, or left (root may), ends here.
  reaper_.kill_orphans({keeper_->pid()});
}

void PosixProcessSpawner::freeze_container(int container, bool frozen) {
  auto found = containers_.find(container);
  if (found == containers_.end() || found->second == 0) return;
  if (!cgroups_->freeze(found->second, frozen))  // the workers' SIGSTOP still holds them
    log::debug("cannot write cgroup.freeze of worker group ", found->second, ": ",
               std::strerror(errno));
}

void PosixProcessSpawner::close_container(int container) {
  auto found = containers_.find(container);
  if (found == containers_.end()) return;
  kill_container(container);
  if (found->second > 0) cgroups_->remove(found->second);
  containers_.erase(found);
}

}  // namespace cohort
