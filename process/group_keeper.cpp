#include "process/group_keeper.hpp"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/console.hpp"
#include "common/log.hpp"
#include "common/signal_blocking.hpp"
#include "process/agent_silence.hpp"
#include "process/process_tree.hpp"
#include "process/worker_cgroups.hpp"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kScanInterval{1};
constexpr std::chrono::seconds kRemovalPatience{2};
// How long the keeper's last messages may wait for a console that does not read.
constexpr std::chrono::seconds kMessagesPatience{1};
constexpr std::chrono::milliseconds kStarvedRecheck{250};

// The forked keeper. It is a whole process (forked before the agent starts a thread of its own,
// when the console's writer thread, which holds no lock then, may be its only other one), so it
// may allocate; it reads the agent's lines: "+pgid", "-pgid", "t" (a tick), "p" (a pause: no tick
// is missed until the next one), "c<cgroup directory>", "r<directory>".
class Keeper {
 public:
  Keeper(int pipe_read, pid_t agent, std::chrono::milliseconds stale_limit)
      : pipe_read_(pipe_read), agent_(agent), self_(::getpid()), stale_limit_(stale_limit) {}

  [[noreturn]] void run() {
    Clock::time_point last_tick = Clock::now(), next_scan = Clock::now();
    ProcessVitals at_tick = read_process_vitals(agent_).value_or(ProcessVitals{});
    Clock::time_point recheck{};  // when a starved agent is looked at again
    bool stale = false;
    for (;;) {
      Clock::time_point now = Clock::now();
      Clock::time_point next_judgement = std::max(last_tick + stale_limit_, recheck);
      if (!stale && !paused_ && now >= next_judgement) {
        auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_tick);
        std::string verdict =
            silence_verdict(at_tick, read_process_vitals(agent_), silent, stale_limit_);
        if (verdict.empty()) {
          recheck = next_judgement = now + kStarvedRecheck;  // starved, not dead: look again
        } else {
          log::warn("the agent (pid ", agent_, ") has shown no sign of life for ", silent.count(),
                    " ms (", verdict, "): killing its workers");
          kill_everything(true);
          stale = true;  // once, until it ticks again
        }
      }
      if (cgroup_.empty() && now >= next_scan) {
        remember_descendants();
        next_scan = now + kScanInterval;
      }
      Clock::time_point wake = now + std::chrono::hours(1);
      if (!stale && !paused_) wake = std::min(wake, next_judgement);
      if (cgroup_.empty()) wake = std::min(wake, next_scan);
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
      pollfd pipe{pipe_read_, POLLIN, 0};
      int ready = ::poll(&pipe, 1, static_cast<int>(std::clamp<int64_t>(wait + 1, 0, 3600000)));
      if (ready <= 0) continue;  // a timeout, or EINTR
      char buffer[4096];
      ssize_t got = ::read(pipe_read_, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;  // the agent is gone
      pending_.append(buffer, static_cast<size_t>(got));
      if (take_lines()) {
        last_tick = Clock::now();
        at_tick = read_process_vitals(agent_).value_or(ProcessVitals{});
        stale = false;
      }
    }
    kill_everything(false);
    if (!cgroup_.empty()) {
      auto give_up = Clock::now() + kRemovalPatience;
      while (!remove_cgroup(cgroup_) && Clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    remove_leftover();
    console::drain(kMessagesPatience);  // _exit runs no atexit handler
    ::_exit(0);
  }

 private:
  // Applies every complete line; true when one was a tick.
  bool take_lines() {
    bool ticked = false;
    size_t newline;
    while ((newline = pending_.find('\n')) != std::string::npos) {
      std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      if (line.empty()) continue;
      pid_t group = static_cast<pid_t>(std::atol(line.c_str() + 1));
      if (line[0] == '+' && group > 1) groups_.insert(group);
      if (line[0] == '-') groups_.erase(group);
      if (line[0] == 't') ticked = true;
      paused_ = line[0] == 'p' || (paused_ && line[0] != 't');
      if (line[0] == 'c') {
        cgroup_ = line.substr(1);
        descendants_.clear();  // the cgroups hold them all from now on
      }
      if (line[0] == 'r') leftover_ = line.substr(1);
    }
    return ticked;
  }

  // The agent's temporary directory, which it would have removed itself at a clean exit: only a
  // cohort_* directory, and only once the workers that wrote there are dead.
  void remove_leftover() {
    fs::path directory(leftover_);
    if (!directory.is_absolute() || directory.filename().string().rfind("cohort_", 0) != 0) return;
    std::error_code ignored;
    fs::remove_all(directory, ignored);
  }

  // Without cgroups: what is below the agent now, to find it again once the agent is dead (by
  // then, what the workers left in other sessions has been re-parented away).
  void remember_descendants() {
    std::vector<ProcStat> table = scan_processes();
    std::map<pid_t, uint64_t> started;
    for (const ProcStat& process : table) started[process.pid] = process.start_time;
    descendants_.clear();
    for (pid_t pid : descendants(table, {agent_}, self_)) descendants_[pid] = started[pid];
  }

  // Every process below the agent (but this one), every known group, and the cgroups.
  void kill_everything(bool agent_alive) {
    std::vector<pid_t> roots;
    if (agent_alive) {
      for (const ProcStat& process : scan_processes()) {
        if (process.ppid == agent_ && process.pid != self_) roots.push_back(process.pid);
      }
    } else {
      for (const auto& [pid, start_time] : descendants_) {
        auto now = read_proc_stat(pid);
        if (now && now->start_time == start_time) roots.push_back(pid);  // not a reused pid
      }
    }
    kill_trees(roots, self_);  // before the groups: a killed parent would set its children free
    for (pid_t group : groups_) ::kill(-group, SIGKILL);
    groups_.clear();
    if (!cgroup_.empty()) kill_cgroup(cgroup_);
  }

  int pipe_read_;
  pid_t agent_, self_;
  std::chrono::milliseconds stale_limit_;
  bool paused_ = false;  ///< since a "p" line, until the next tick
  std::string pending_;
  std::set<pid_t> groups_;
  std::string cgroup_;
  std::string leftover_;  ///< removed once the agent is gone (remove_when_orphaned)
  std::map<pid_t, uint64_t> descendants_;  ///< pid: start time, as last seen
};

// The forked keeper's start, with every signal blocked since the fork: it leaves the agent's
// process group and descriptors, ignores what a terminal or a user would send the job, takes back
// SIGCHLD's (and any other caught signal's) default, then runs until the agent is gone.
[[noreturn]] void run_keeper(const int fds[2], pid_t agent, std::chrono::milliseconds stale_limit) {
  ::close(fds[1]);
  // Keep nothing of the agent's open (sockets, other pipes); stderr stays for diagnostics.
  for (int fd = 3; fd < 1024; ++fd) {
    if (fd != fds[0]) ::close(fd);
  }
  ::setpgid(0, 0);  // a terminal's Ctrl-C goes to the agent, which decides what happens
  // Not stopped by a terminal either (its stderr may be one, in the background).
  for (int signal :
       {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU})
    ::signal(signal, SIG_IGN);
  unblock_signals_in_child();
  Keeper(fds[0], agent, stale_limit).run();
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
  pid_t agent = ::getpid();
  pid_t pid;
  {
    SignalsBlocked blocked;  // the agent's handlers must not run in the keeper (a Ctrl-Z there)
    pid = ::fork();
    if (pid == 0) run_keeper(fds, agent, stale_limit);
  }
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return false;
  }
  ::close(fds[0]);
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
