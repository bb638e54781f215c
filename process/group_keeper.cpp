#include "process/group_keeper.hpp"

#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "process/keeper_process.hpp"

extern char** environ;

namespace cohort {
namespace {

// Where the keeper finds its pipe.
constexpr int kKeeperPipeFd = 3;

// The keeper's argv: cohort __keeper <pipe fd> <agent pid> <stale ms> <log level>.
std::vector<std::string> keeper_words(std::chrono::milliseconds stale_limit) {
  return {"cohort",
          std::string(kKeeperCommand),
          std::to_string(kKeeperPipeFd),
          std::to_string(::getpid()),
          std::to_string(stale_limit.count()),
          std::to_string(static_cast<int>(log::level()))};
}

// Starts the keeper with posix_spawn (a vfork and exec: nothing of the agent's other threads
// matters, and a failed exec is its error): the pipe's read end at kKeeperPipeFd and nothing else
// of the agent's open (sockets, other pipes; stdio stays, stderr for diagnostics), in a process
// group of its own (a terminal's Ctrl-C goes to the agent, which decides what happens), no signal
// blocked. 0, or the error.
int spawn_keeper(int pipe_read, std::chrono::milliseconds stale_limit, pid_t& pid) {
  std::vector<std::string> words = keeper_words(stale_limit);
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawnattr_init(&attributes);
  ::posix_spawn_file_actions_adddup2(&actions, pipe_read, kKeeperPipeFd);  // not close-on-exec
  ::posix_spawn_file_actions_addclosefrom_np(&actions, kKeeperPipeFd + 1);
  ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  ::posix_spawnattr_setpgroup(&attributes, 0);
  sigset_t none;
  ::sigemptyset(&none);
  ::posix_spawnattr_setsigmask(&attributes, &none);
  int error = ::posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, argv.data(), environ);
  ::posix_spawnattr_destroy(&attributes);
  ::posix_spawn_file_actions_destroy(&actions);
  return error;
}

}  // namespace

GroupKeeper::~GroupKeeper() {
  tick_timer_.cancel();
  if (pipe_write_ >= 0) ::close(pipe_write_);
}

bool GroupKeeper::start(std::chrono::milliseconds stale_limit) {
  stale_limit = std::max<std::chrono::milliseconds>(stale_limit, kMinStaleLimit);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  pid_t pid = -1;
  // A keeper that stops reading (stopped, hung) must never block the agent's thread: a full pipe
  // fails a write, of at most PIPE_BUF bytes, whole.
  int error =
      ::fcntl(fds[1], F_SETFL, O_NONBLOCK) == 0 ? spawn_keeper(fds[0], stale_limit, pid) : errno;
  ::close(fds[0]);
  if (error != 0) {
    ::close(fds[1]);
    errno = error;
    return false;
  }
  pipe_write_ = fds[1];
  keeper_pid_ = pid;
  tick();
  return true;
}

void GroupKeeper::add(pid_t process_group) { send("+" + std::to_string(process_group) + "\n"); }
void GroupKeeper::remove(pid_t process_group) { send("-" + std::to_string(process_group) + "\n"); }
void GroupKeeper::pause() { send("p\n"); }

void GroupKeeper::continue_ticking() {
  tick_timer_.cancel();
  tick();
}

bool GroupKeeper::contain_in(const std::string& cgroup_directory) {
  return send_path('c', cgroup_directory);
}

bool GroupKeeper::remove_when_orphaned(const std::string& directory) {
  return send_path('r', directory);
}

bool GroupKeeper::send_path(char kind, const std::string& path) {
  // One write of at most PIPE_BUF bytes: no worker's announcement can cut through it.
  if (path.empty() || path.size() + 2 > PIPE_BUF || path.find('\n') != std::string::npos) {
    return false;
  }
  return send(kind + path + "\n");
}

void GroupKeeper::tick() {
  if (!send("t\n") && errno == EPIPE && !keeper_gone_) {
    keeper_gone_ = true;  // a worker (same user) may kill it; nothing can start another now
    log::warn("the group keeper (pid ", keeper_pid_,
              ") is gone: should this agent die now, its workers' own children may outlive it");
  }
  tick_timer_.expires_after(kTickInterval);
  tick_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) tick();
  });
}

bool GroupKeeper::send(std::string_view line) {
  if (pipe_write_ < 0) return false;
  ssize_t written;
  do {
    written = ::write(pipe_write_, line.data(), line.size());
  } while (written < 0 && errno == EINTR);
  return written == static_cast<ssize_t>(line.size());
}

}  // namespace cohort
