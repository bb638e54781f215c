#include "process/keeper_process.hpp"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/console.hpp"
#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "process/agent_silence.hpp"
#include "process/process_tree.hpp"
#include "process/worker_cgroups.hpp"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kScanInterval{1};
constexpr std::chrono::seconds kRemovalPatience{2};
// How long an agent that closed the pipe itself may take to die (a sanitizer's leak check at exit
// takes a second or two).
constexpr std::chrono::seconds kAgentExitPatience{10};
// How long the keeper's last messages may wait for a console that does not read.
constexpr std::chrono::seconds kMessagesPatience{1};
constexpr std::chrono::milliseconds kStarvedRecheck{250};
// The longest line the agent writes: a directory's path and its one-letter tag.
constexpr size_t kLongestLine = PATH_MAX + 1;

// The keeper's watch, until the agent is gone. It reads the agent's lines: "+pgid", "-pgid", "t" (a
// tick), "p" (a pause: no tick is missed until the next one), "c<cgroup directory>",
// "r<directory>".
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
      if (got <= 0) break;  // the agent is gone, or going
      if (take_lines(std::string_view(buffer, static_cast<size_t>(got)))) {
        last_tick = Clock::now();
        at_tick = read_process_vitals(agent_).value_or(ProcessVitals{});
        stale = false;
      }
    }
    await_agent_exit();
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
  // Applies every line `chunk` completes; true when one was a tick. A line longer than any the
  // agent writes (a path, at most) is dropped up to its end, so that no writer to the pipe can
  // grow the keeper without a bound.
  bool take_lines(std::string_view chunk) {
    bool ticked = false;
    for (size_t newline; (newline = chunk.find('\n')) != std::string_view::npos;) {
      if (!dropping_) {
        pending_.append(chunk.substr(0, newline));
        ticked = apply(pending_) || ticked;
      }
      pending_.clear();
      dropping_ = false;
      chunk.remove_prefix(newline + 1);
    }
    if (!dropping_) pending_.append(chunk);
    if (pending_.size() > kLongestLine) {
      log::warn("the keeper dropped a line of more than ", kLongestLine, " bytes from its pipe");
      pending_.clear();
      dropping_ = true;
    }
    return ticked;
  }

  // Applies one of the agent's lines; true when it was a tick.
  bool apply(const std::string& line) {
    if (line.empty()) return false;
    pid_t group = static_cast<pid_t>(std::atol(line.c_str() + 1));
    if (line[0] == '+' && group > 1) groups_.insert(group);
    if (line[0] == '-') groups_.erase(group);
    paused_ = line[0] == 'p' || (paused_ && line[0] != 't');
    if (line[0] == 'c') {
      cgroup_ = line.substr(1);
      descendants_.clear();  // the cgroups hold them all from now on
    }
    if (line[0] == 'r') leftover_ = line.substr(1);
    return line[0] == 't';
  }

  // The pipe ends when the agent dies, or when it closes its end at a clean exit, a moment before
  // it dies. What it still runs then is its own (LeakSanitizer's tracer, a clone of it, is its
  // child for the length of the leak check), not what its workers left: once the agent is gone
  // (this process, its child, has a new parent), only those are left to kill.
  void await_agent_exit() const {
    auto give_up = Clock::now() + kAgentExitPatience;
    while (::getppid() == agent_ && Clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
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
    descendants_.clear();
    for (pid_t pid : descendants_now({agent_}, self_)) {
      if (auto stat = read_proc_stat(pid)) descendants_[pid] = stat->start_time;
    }
  }

  // Every process below the agent (but this one), every known group, and the cgroups.
  void kill_everything(bool agent_alive) {
    std::vector<pid_t> roots;
    if (agent_alive) {
      for (pid_t child : children_now(agent_)) {
        if (child != self_) roots.push_back(child);
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
  bool paused_ = false;    ///< since a "p" line, until the next tick
  std::string pending_;    ///< the line being read
  bool dropping_ = false;  ///< until the end of a line too long to keep
  std::set<pid_t> groups_;
  std::string cgroup_;
  std::string leftover_;  ///< removed once the agent is gone (remove_when_orphaned)
  std::map<pid_t, uint64_t> descendants_;  ///< pid: start time, as last seen
};

// A whole decimal number in [low, high], or nullopt.
std::optional<int64_t> number_in(const char* text, int64_t low, int64_t high) {
  std::optional<int64_t> value = parse_int(text);
  if (!value || *value < low || *value > high) return std::nullopt;
  return value;
}

int refused_by_hand() {
  std::cerr << "cohort " << kKeeperCommand
            << ": the group keeper is started by cohort run's agent, not by hand\n";
  return kExitUsage;
}

bool is_pipe(int fd) {
  struct stat status {};
  return ::fstat(fd, &status) == 0 && S_ISFIFO(status.st_mode);
}

}  // namespace

int run_keeper_process(int argc, char** argv) {
  // argv: cohort __keeper <pipe fd> <agent pid> <stale ms> <log level>
  if (argc != 6) return refused_by_hand();
  auto fd = number_in(argv[2], 3, 1 << 20);
  auto agent = number_in(argv[3], 2, 1 << 30);
  auto stale_ms = number_in(argv[4], 1, int64_t{1} << 40);
  auto level = number_in(argv[5], 0, static_cast<int64_t>(log::Level::Off));
  // The agent may be gone already (killed while the keeper started): the pipe still holds what it
  // said, and its end is the agent's death.
  if (!fd || !agent || !stale_ms || !level || !is_pipe(static_cast<int>(*fd)))
    return refused_by_hand();
  // Not stopped by a terminal either (its stderr may be one, in the background), nor by what a
  // user sends the job; the agent decides what happens to it.
  for (int signal :
       {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU})
    ::signal(signal, SIG_IGN);
  log::set_level(static_cast<log::Level>(*level));
  Keeper(static_cast<int>(*fd), static_cast<pid_t>(*agent), std::chrono::milliseconds(*stale_ms))
      .run();
}

}  // namespace cohort
