#include "agent/earlier_agent.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <set>
#include <thread>

#include "common/log.hpp"
#include "common/text.hpp"
#include "process/keeper_process.hpp"
#include "process/process_tree.hpp"

namespace cohort {

namespace {

constexpr std::string_view kLaunchedMsAgo = "--launched-ms-ago";
constexpr size_t kMaxCommandLineBytes = 256 * 1024;
constexpr std::chrono::seconds kKeeperPatience{5};

// The line without --launched-ms-ago and its value.
std::vector<std::string> without_launch_age(const std::vector<std::string>& argv) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == kLaunchedMsAgo) {
      ++i;
    } else if (argv[i].rfind(std::string(kLaunchedMsAgo) + "=", 0) != 0) {
      kept.push_back(argv[i]);
    }
  }
  return kept;
}

bool launched_agent_line(const std::vector<std::string>& argv) {
  return argv.size() > 2 && argv[1] == "run" &&
         std::find(argv.begin(), argv.end(), "--under-launch") != argv.end();
}

std::vector<std::string> command_line_of(const std::string& proc_dir) {
  std::ifstream file(proc_dir + "/cmdline", std::ios::binary);
  std::string text(kMaxCommandLineBytes, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(file.gcount()));
  std::vector<std::string> argv;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    argv.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return argv;
}

bool keeper_line(const std::vector<std::string>& argv) {
  return argv.size() > 1 && argv[1] == kKeeperCommand;
}

// Every process of this pid namespace that runs `cohort run --under-launch` or a keeper (whatever
// binary path), with its parent and owner.
std::vector<ProcessLine> agents_and_keepers_here() {
  std::vector<ProcessLine> found;
  for (const ProcStat& process : scan_processes()) {
    std::string dir = "/proc/" + std::to_string(process.pid);
    ProcessLine line{process.pid, process.ppid, 0, command_line_of(dir)};
    struct stat owner {};
    if (!launched_agent_line(line.argv) && !keeper_line(line.argv)) continue;
    if (::stat(dir.c_str(), &owner) != 0) continue;
    line.uid = owner.st_uid;
    found.push_back(std::move(line));
  }
  return found;
}

// A process of `pids` that has not ended: a zombie (its parent, say a stopped sshd, has not
// reaped it yet) has ended, and so has a pid that another process now holds.
struct Watched {
  pid_t pid;
  uint64_t start_time;
};

std::vector<Watched> watch(const std::vector<pid_t>& pids) {
  std::vector<Watched> watched;
  for (pid_t pid : pids) {
    if (auto stat = read_proc_stat(pid)) watched.push_back({pid, stat->start_time});
  }
  return watched;
}

bool running(const Watched& process) {
  auto stat = read_proc_stat(process.pid);
  return stat && stat->state != 'Z' && stat->state != 'X' && stat->start_time == process.start_time;
}

bool wait_for_end(const std::vector<Watched>& processes, std::chrono::milliseconds patience) {
  auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    if (std::none_of(processes.begin(), processes.end(), running)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void kill_running(const std::vector<Watched>& processes) {
  for (const Watched& process : processes) {
    if (running(process)) ::kill(process.pid, SIGKILL);
  }
}

}  // namespace

bool same_launched_agent(const std::vector<std::string>& mine,
                         const std::vector<std::string>& other) {
  return launched_agent_line(mine) && launched_agent_line(other) &&
         without_launch_age(mine) == without_launch_age(other);
}

EarlierAgents find_earlier_agents(const std::vector<ProcessLine>& processes, pid_t self, uid_t uid,
                                  const std::vector<std::string>& mine) {
  std::set<pid_t> matching;
  for (const ProcessLine& process : processes) {
    if (process.pid != self && process.ppid != self && process.uid == uid &&
        same_launched_agent(mine, process.argv))
      matching.insert(process.pid);
  }
  EarlierAgents earlier;
  for (const ProcessLine& process : processes) {
    if (matching.count(process.pid)) earlier.agents.push_back(process.pid);
    if (matching.count(process.ppid) && keeper_line(process.argv))
      earlier.keepers.push_back(process.pid);
  }
  return earlier;
}

size_t stop_earlier_agents(std::chrono::milliseconds patience) {
  EarlierAgents earlier = find_earlier_agents(agents_and_keepers_here(), ::getpid(), ::getuid(),
                                              command_line_of("/proc/self"));
  if (earlier.agents.empty()) return 0;
  std::string pids;
  for (pid_t pid : earlier.agents) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
  log::warn("this host's earlier agent of the run is still running (pid ", pids,
            "), although the launch lost its ssh connection: stopping it first");
  std::vector<Watched> agents = watch(earlier.agents);
  std::vector<Watched> keepers = watch(earlier.keepers);
  for (const Watched& agent : agents) ::kill(agent.pid, SIGTERM);
  if (!wait_for_end(agents, patience)) {
    log::warn("the earlier agent did not end within ", format_duration(patience), ": SIGKILL");
    kill_running(agents);
  }
  // A keeper ends once it has killed what its agent left, at once when it sees the agent die.
  if (!wait_for_end(keepers, kKeeperPatience)) kill_running(keepers);
  return earlier.agents.size();
}

}  // namespace cohort
