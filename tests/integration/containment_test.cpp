// `cohort run` on one node: what a worker starts outside its process group (a daemon: setsid and
// a double fork) ends with the worker group, after a normal exit, after a failure's restart, and
// when cohort is SIGKILLed; and a stopped (SIGSTOP) agent's workers are killed by its keeper once
// the heartbeat timeout has passed, while an agent starved of CPU by an overloaded machine keeps
// them; Ctrl-Z with cgroups pauses what a worker started in a session of its own too. Each runs
// with the worker groups in cgroups (root here) and, but for the pause, with COHORT_NO_CGROUP=1
// (the subreaper fallback). Real cohort, real test_worker processes.
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "common/text.hpp"
#include "process/process_tree.hpp"
#include "process/worker_cgroups.hpp"
#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

const std::string kWorker = kTestWorkerBin;

struct Mode {
  std::string name;
  bool cgroup = false;
  std::map<std::string, std::string> env;
};

// The cgroup v2 directory this test (and so every cohort it starts) is in; empty if none.
std::string own_cgroup_directory() {
  std::string why;
  std::string own = cohort::unified_cgroup_path(read_file("/proc/self/cgroup"), why);
  if (own.empty()) return {};
  return cohort::cgroup2_directory(read_file("/proc/self/mountinfo"), own, why);
}

bool cgroups_usable() {
  std::string directory = own_cgroup_directory();
  if (::geteuid() != 0 || directory.empty()) return false;
  return ::access((directory + "/cgroup.procs").c_str(), W_OK) == 0;
}

// Both ways of containing workers: cgroups (the default as root), and the fallback.
std::vector<Mode> modes() {
  require_prerequisite(cgroups_usable(),
                       "root and a cgroup v2 hierarchy (the cgroup2 mount of /proc/self/mountinfo)"
                       " in which cohort can make cgroups");
  return {Mode{"cgroup", true, {{"LOGLEVEL", "DEBUG"}}},
          Mode{"fallback", false, {{"LOGLEVEL", "DEBUG"}, {"COHORT_NO_CGROUP", "1"}}}};
}

// The per-agent cgroup directory of the cohort whose pid is `agent`.
std::string agent_cgroup(pid_t agent) {
  return own_cgroup_directory() + "/cohort-" + std::to_string(agent);
}

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

// The cgroup v2 path of `pid` ("0::" line of /proc/<pid>/cgroup).
std::string cgroup_of(pid_t pid) {
  std::string why;
  return cohort::unified_cgroup_path(read_file("/proc/" + std::to_string(pid) + "/cgroup"), why);
}

// Checks that the debug line about containment names the mode, and that a process of the
// workers is (or is not) in one of the agent's cgroups.
void check_mode(const Mode& mode, const std::string& err, pid_t agent, pid_t worker_process) {
  if (mode.cgroup) {
    CHECK(contains(err, "worker groups run in cgroups under"));
    CHECK(contains(cgroup_of(worker_process), "/cohort-" + std::to_string(agent) + "/group-"));
  } else {
    CHECK(contains(err, "worker groups run without a cgroup (COHORT_NO_CGROUP is set)"));
    CHECK_FALSE(contains(cgroup_of(worker_process), "/cohort-"));
  }
}

bool gone(pid_t pid, std::chrono::milliseconds timeout = 10s) {
  return wait_until([&] { return !process_alive(pid); }, timeout);
}

// Waits for what the keeper scans once a second without cgroups: the agent's descendants, to be
// found again once the agent is dead. Nothing shows that a scan happened; two periods do.
void let_the_keeper_look() { std::this_thread::sleep_for(2500ms); }

// A pid that no process has now: a child's, once reaped.
pid_t dead_pid() {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

// cohort with two hanging workers that have each started a daemon (setsid, double fork), once
// both are ready: `extra` flags go before the worker command.
std::unique_ptr<ChildProcess> start_two_with_daemons(const Scratch& scratch, const Mode& mode,
                                                     std::vector<std::string> extra) {
  std::vector<std::string> args{"--nproc-per-node", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), {"--no-python", kWorker, "--pid-file", scratch.file("pid_${local_rank}"),
                           "--spawn-daemon", scratch.file("daemon_${local_rank}"), "--ready-file",
                           scratch.file("ready_${local_rank}"), "--hang"});
  auto cohort = scratch.start(args, mode.env);
  bool ready = wait_until(
      [&] { return file_exists(scratch.file("ready_0")) && file_exists(scratch.file("ready_1")); });
  INFO(cohort->output());
  REQUIRE(ready);
  return cohort;
}

// Moves every thread of `pid` onto CPU 0 at the lowest priority (nice 19).
void push_to_cpu0_at_lowest_priority(pid_t pid) {
  cpu_set_t cpu0;
  CPU_ZERO(&cpu0);
  CPU_SET(0, &cpu0);
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(tasks.c_str());
  REQUIRE(dir != nullptr);
  while (dirent* entry = ::readdir(dir)) {
    pid_t tid = std::atoi(entry->d_name);
    if (tid <= 0) continue;
    CHECK(::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), 19) == 0);
    CHECK(::sched_setaffinity(tid, sizeof(cpu0), &cpu0) == 0);
  }
  ::closedir(dir);
}

// A process that spins on CPU 0 at the highest priority (nice -20) until killed.
pid_t spin_on_cpu0() {
  pid_t hog = ::fork();
  if (hog != 0) return hog;
  cpu_set_t cpu0;
  CPU_ZERO(&cpu0);
  CPU_SET(0, &cpu0);
  ::sched_setaffinity(0, sizeof(cpu0), &cpu0);
  ::setpriority(PRIO_PROCESS, 0, -20);
  for (;;) {
  }
}

bool write_control(const std::string& path, const std::string& value) {
  std::ofstream file(path);
  file << value;
  file.flush();
  return static_cast<bool>(file);
}

// The process's CPU time so far (all its threads, /proc/<pid>/stat's utime + stime).
std::chrono::milliseconds cpu_time_of(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  unsigned long long ticks = 0;
  for (int index = 3; rest >> field; ++index) {
    if (index == 14 || index == 15) ticks += std::stoull(field);
    if (index == 15) break;
  }
  return std::chrono::milliseconds(ticks * 1000 /
                                   static_cast<unsigned long long>(::sysconf(_SC_CLK_TCK)));
}

// A CPU cgroup whose processes share 1 ms of CPU a second (the CFS quota's least), where a
// spinner eats that ms: a process moved in stays runnable ('R') but gets almost no CPU, however
// the scheduler hands out slices (a nice level alone leaves it a slice every few hundred ms).
// Made in the cgroup v1 "cpu" hierarchy, or in the v2 one; released, with its
// processes moved back, on destruction. The test's own, on the test's thread.
class RationedCpu {
 public:
  RationedCpu() {
    std::string mounts = read_file("/proc/self/mountinfo");
    std::istringstream lines(mounts);
    for (std::string line; std::getline(lines, line) && directory_.empty();) {
      std::istringstream fields(line);
      std::vector<std::string> field{std::istream_iterator<std::string>(fields), {}};
      if (field.size() < 10 || field[3] != "/") continue;
      std::string type = field[field.size() - 3], options = field.back();
      bool v1_cpu = type == "cgroup" && ("," + options + ",").find(",cpu,") != std::string::npos;
      if (v1_cpu) try_v1(field[4]);
      if (type == "cgroup2") try_v2(field[4]);
    }
  }
  ~RationedCpu() { release(); }
  bool usable() const { return !directory_.empty(); }
  // Moves every process in the cgroup (those moved in, and any they started) back to the test's
  // own cgroup, and removes the cgroup.
  void release() {
    if (directory_.empty()) return;
    wait_until(
        [&] {
          std::istringstream procs(read_file(directory_ + "/cgroup.procs"));
          for (std::string pid; procs >> pid;) write_control(home_ + "/cgroup.procs", pid);
          return ::rmdir(directory_.c_str()) == 0;
        },
        5s);
    directory_.clear();
  }
  void move_in(pid_t pid) {
    REQUIRE(write_control(directory_ + "/cgroup.procs", std::to_string(pid)));
  }

 private:
  void try_v1(const std::string& mount_point) {
    std::string own = cgroup_line("cpu");
    if (own.empty()) return;
    std::string home = mount_point + (own == "/" ? "" : own);
    make(home, home, {{"cpu.cfs_period_us", "1000000"}, {"cpu.cfs_quota_us", "1000"}});
  }
  // Under the nearest ancestor that hands its children the cpu controller (the test's own cgroup
  // holds processes, so it cannot); at the root, which may hold processes, it is turned on.
  void try_v2(const std::string& mount_point) {
    std::string why;
    std::string own = cohort::unified_cgroup_path(read_file("/proc/self/cgroup"), why);
    if (own.empty()) return;
    std::string home = mount_point + (own == "/" ? "" : own);
    std::vector<std::pair<std::string, std::string>> limits{{"cpu.max", "1000 1000000"}};
    if (own == "/") {
      if (!has_word(read_file(mount_point + "/cgroup.controllers"), "cpu")) return;
      write_control(mount_point + "/cgroup.subtree_control", "+cpu");
      return make(mount_point, home, limits);
    }
    for (std::string above = own; above != "/";) {
      above = above.substr(0, std::max<size_t>(above.rfind('/'), 1));
      std::string directory = mount_point + (above == "/" ? "" : above);
      if (has_word(read_file(directory + "/cgroup.subtree_control"), "cpu")) {
        return make(directory, home, limits);
      }
    }
  }
  static bool has_word(const std::string& text, const std::string& word) {
    std::istringstream words(text);
    for (std::string each; words >> each;) {
      if (each == word) return true;
    }
    return false;
  }
  // The path of this process's cgroup in the v1 hierarchy with `controller`.
  static std::string cgroup_line(const std::string& controller) {
    std::istringstream lines(read_file("/proc/self/cgroup"));
    for (std::string line; std::getline(lines, line);) {
      size_t first = line.find(':'), second = line.find(':', first + 1);
      if (first == std::string::npos || second == std::string::npos) continue;
      std::string names = "," + line.substr(first + 1, second - first - 1) + ",";
      if (names.find("," + controller + ",") != std::string::npos) return line.substr(second + 1);
    }
    return {};
  }
  // Makes the cgroup under `parent`; the processes moved in go back to `home` on release.
  void make(const std::string& parent, const std::string& home,
            std::vector<std::pair<std::string, std::string>> limits) {
    std::string directory = parent + "/cohort-test-rationed-" + std::to_string(::getpid());
    if (::mkdir(directory.c_str(), 0755) != 0) return;
    for (const auto& [name, value] : limits) {
      if (!write_control(directory + "/" + name, value)) {
        ::rmdir(directory.c_str());
        return;
      }
    }
    directory_ = directory;
    home_ = home;
  }

  std::string directory_;
  std::string home_;  ///< the test's own cgroup in that hierarchy, where the processes came from
};

}  // namespace

TEST_CASE("a worker's daemon dies when the group ends after a normal exit",
          "[integration][run][containment]") {
  for (const Mode& mode : modes()) {
    INFO("mode " << mode.name);
    Scratch scratch;
    // What an agent killed together with its keeper leaves (Slurm ends a step so): the next
    // agent with cgroups removes it.
    std::string abandoned = agent_cgroup(dead_pid());
    REQUIRE(::mkdir(abandoned.c_str(), 0755) == 0);
    REQUIRE(::mkdir((abandoned + "/group-1").c_str(), 0755) == 0);
    auto cohort = scratch.start({"--nproc-per-node", "2", "--no-python", kWorker, "--spawn-daemon",
                                 scratch.file("daemon_${local_rank}")},
                                mode.env);
    auto status = cohort->wait(60s);
    INFO(cohort->output());
    REQUIRE(status.has_value());
    CHECK(status->shell_code() == 0);
    for (int local_rank = 0; local_rank < 2; ++local_rank) {
      pid_t daemon = read_pid(scratch.file("daemon_" + std::to_string(local_rank)));
      INFO("daemon " << daemon << "\n" << describe_processes({daemon}));
      REQUIRE(daemon > 0);
      CHECK(gone(daemon));
    }
    CHECK(contains(cohort->err(), mode.cgroup ? "worker groups run in cgroups under"
                                              : "worker groups run without a cgroup"));
    CHECK(wait_until([&] { return !exists(agent_cgroup(cohort->pid())); }));
    CHECK(exists(abandoned) != mode.cgroup);
    cohort::remove_cgroup(abandoned);
    CHECK(scratch.nothing_left());
  }
}

TEST_CASE("a worker's daemon dies with its group when a failure restarts it, the next one lives",
          "[integration][run][containment]") {
  for (const Mode& mode : modes()) {
    INFO("mode " << mode.name);
    Scratch scratch;
    // Round 0 starts a daemon and fails; round 1 starts another and hangs.
    auto cohort = scratch.start(
        {"--nproc-per-node", "1", "--max-restarts", "1", "--shutdown-timeout", "20", "--no-python",
         kWorker, "--spawn-daemon", scratch.file("daemon_{TORCHELASTIC_RESTART_COUNT}"),
         "--ready-file", scratch.file("ready_{TORCHELASTIC_RESTART_COUNT}"), "--fail-first-n-runs",
         "1", scratch.file("runs"), "--exit-code", "1", "--hang"},
        mode.env);
    bool restarted = wait_until([&] { return file_exists(scratch.file("ready_1")); }, 30s);
    INFO(cohort->output());
    REQUIRE(restarted);
    pid_t first = read_pid(scratch.file("daemon_0"));
    pid_t second = read_pid(scratch.file("daemon_1"));
    REQUIRE(first > 0);
    REQUIRE(second > 0);
    {
      INFO(describe_processes({first}));
      CHECK(gone(first));  // while cohort, its agent, runs on
    }
    CHECK(process_alive(second));  // the running group's own is left alone
    check_mode(mode, cohort->err(), cohort->pid(), second);
    if (mode.cgroup) {
      CHECK(wait_until([&] { return !exists(agent_cgroup(cohort->pid()) + "/group-1"); }));
    }

    cohort->signal(SIGTERM);
    auto status = cohort->wait(30s);
    REQUIRE(status.has_value());
    CHECK(status->shell_code() == 143);
    CHECK(gone(second));
    CHECK(wait_until([&] { return !exists(agent_cgroup(cohort->pid())); }));
    CHECK(scratch.nothing_left());
  }
}

TEST_CASE("kill -9 of cohort takes the workers' daemons with it, through the keeper",
          "[integration][run][containment]") {
  for (const Mode& mode : modes()) {
    INFO("mode " << mode.name);
    Scratch scratch;
    auto cohort = start_two_with_daemons(scratch, mode, {});
    std::vector<pid_t> daemons{read_pid(scratch.file("daemon_0")),
                               read_pid(scratch.file("daemon_1"))};
    for (pid_t daemon : daemons) {
      REQUIRE(process_alive(daemon));
      CHECK(::getsid(daemon) != ::getsid(read_pid(scratch.file("pid_0"))));  // really detached
      check_mode(mode, cohort->err(), cohort->pid(), daemon);
    }
    if (!mode.cgroup) let_the_keeper_look();
    CHECK(entries_starting_with(scratch.tmp(), "cohort_").size() == 1);  // its temporary logs
    cohort->signal(SIGKILL);
    REQUIRE(cohort->wait(10s).has_value());
    for (pid_t daemon : daemons) {
      INFO(describe_processes({daemon}));
      CHECK(gone(daemon));
    }
    CHECK(wait_until([&] { return !exists(agent_cgroup(cohort->pid())); }));
    // Removed by the keeper, as the agent would have at a clean exit.
    CHECK(wait_until([&] { return entries_starting_with(scratch.tmp(), "cohort_").empty(); }));
    CHECK(scratch.nothing_left());
  }
}

TEST_CASE("a stopped agent's workers and their daemons are killed by the keeper",
          "[integration][run][containment]") {
  for (const Mode& mode : modes()) {
    INFO("mode " << mode.name);
    Scratch scratch;
    // The stale limit is the heartbeat timeout, but at least 3 s.
    auto cohort = start_two_with_daemons(
        scratch, mode,
        {"--rdzv-conf", "heartbeat_interval=0.2,heartbeat_timeout=1", "--shutdown-timeout", "20"});
    std::vector<pid_t> processes;
    for (const char* stem : {"pid_0", "pid_1", "daemon_0", "daemon_1"}) {
      processes.push_back(read_pid(scratch.file(stem)));
      REQUIRE(process_alive(processes.back()));
    }
    cohort->signal(SIGSTOP);
    auto stopped_at = std::chrono::steady_clock::now();
    bool all_killed = wait_until(
        [&] {
          for (pid_t pid : processes) {
            if (process_alive(pid)) return false;
          }
          return true;
        },
        15s);
    auto after = std::chrono::steady_clock::now() - stopped_at;
    INFO(describe_processes(processes));
    CHECK(all_killed);
    CHECK(after >= 2500ms);  // not before the stale limit
    CHECK(wait_until([&] { return contains(cohort->err(), "has shown no sign of life"); }));
    CHECK(process_alive(cohort->pid()));  // the keeper leaves the agent alone

    cohort->signal(SIGCONT);  // it finds its workers gone; then it is told to stop
    cohort->signal(SIGTERM);
    auto status = cohort->wait(30s);
    CHECK(status.has_value());
    CHECK(wait_until([&] { return !exists(agent_cgroup(cohort->pid())); }));
    CHECK(scratch.nothing_left());
  }
}

TEST_CASE("Ctrl-Z with cgroups also pauses what a worker started in a session of its own",
          "[integration][run][containment][signals]") {
  Mode mode = modes().front();  // cgroups: the fallback reaches only the workers' process groups
  REQUIRE(mode.cgroup);
  Scratch scratch;
  std::string ticks = scratch.file("ticks");
  std::string ticker = "while :; do echo x >> " + ticks + "; sleep 0.05; done";
  auto cohort = scratch.start({"--nproc-per-node", "1", "--no-python", "sh", "-c",
                               "setsid sh -c '" + ticker + "' & while [ ! -e " +
                                   scratch.file("stop") + " ]; do sleep 0.05; done"},
                              mode.env);
  auto lines = [&] { return occurrences(read_file(ticks), "x"); };
  REQUIRE(wait_until([&] { return lines() >= 3; }));
  cohort->signal(SIGTSTP);
  REQUIRE(wait_until([&] { return process_state(cohort->pid()) == "T"; }));
  std::this_thread::sleep_for(300ms);
  size_t paused = lines();
  std::this_thread::sleep_for(1s);
  CHECK(lines() == paused);  // the ticker's session was not SIGSTOPped: its cgroup was frozen
  cohort->signal(SIGCONT);
  CHECK(wait_until([&] { return lines() > paused; }));
  std::ofstream(scratch.file("stop")).close();
  auto status = cohort->wait(30s);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 0);
  CHECK(scratch.nothing_left());
}

TEST_CASE(
    "an agent starved of CPU past the stale limit keeps its workers until it stops them itself",
    "[integration][run][containment]") {
  require_prerequisite(::geteuid() == 0 && ::sysconf(_SC_NPROCESSORS_ONLN) >= 2,
                       "root (to raise a process to nice -20) and at least 2 CPUs");
  RationedCpu rationed;
  require_prerequisite(rationed.usable(),
                       "a CPU cgroup with a CFS quota: the cgroup v1 \"cpu\" hierarchy, or a v2"
                       " one where the cpu controller is at the root or an ancestor hands it out");
  Scratch scratch;
  // The first attempt's worker sleeps far past the starvation (the agent stops it once it runs
  // again, which on a loaded machine may be seconds after the 7 s) and records the signals it
  // gets; the second exits 0.
  std::string worker = scratch.file("worker.sh");
  write_script(worker, "[ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] || exit 0\nexec " + kWorker +
                           " --record-signals " + scratch.file("signals") + " --ready-file " +
                           scratch.file("ready") + " --sleep-ms 30000\n");
  auto cohort = scratch.start({"--standalone", "--nproc-per-node", "1", "--rdzv-conf",
                               "heartbeat_interval=0.2,heartbeat_timeout=3", "--max-restarts", "1",
                               "--no-python", worker});
  REQUIRE(wait_until([&] { return file_exists(scratch.file("ready")); }));
  // 7 s of starvation: past the stale limit (3 s), within the keeper's patience for a starved
  // agent (4 stale limits). The keeper, outside the rationed cgroup, sees the agent runnable.
  pid_t hog = spin_on_cpu0();
  rationed.move_in(hog);
  push_to_cpu0_at_lowest_priority(cohort->pid());
  rationed.move_in(cohort->pid());
  auto cpu_before = cpu_time_of(cohort->pid());
  std::this_thread::sleep_for(7s);
  auto starved_cpu = cpu_time_of(cohort->pid()) - cpu_before;
  ::kill(hog, SIGKILL);
  REQUIRE(::waitpid(hog, nullptr, 0) == hog);
  rationed.release();  // the agent runs freely again
  INFO("the agent's CPU time while starved: " << starved_cpu.count() << " ms");

  auto status = cohort->wait(40s);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 0);
  CHECK_FALSE(contains(cohort->err(), "has shown no sign of life"));  // the keeper killed nothing
  // The agent, once it ran again, found itself dropped by the rendezvous (its client saw its own
  // stall, or the daemon's silence, depending on which thread ran first) and stopped its worker.
  CHECK(contains(read_file(scratch.file("signals")), "15"));  // SIGTERM, not the keeper's SIGKILL
  CHECK(scratch.nothing_left());
}

// The agent's keeper: its child whose command line is `cohort __keeper ...`; 0 if none.
pid_t keeper_of(pid_t agent) {
  for (const cohort::ProcStat& process : cohort::scan_processes()) {
    if (process.ppid != agent) continue;
    std::string cmdline = read_file("/proc/" + std::to_string(process.pid) + "/cmdline");
    if (cmdline.rfind(std::string("cohort\0__keeper\0", 16), 0) == 0) return process.pid;
  }
  return 0;
}

TEST_CASE("the keeper is cohort's own binary run anew: one thread, its pipe and stdio only",
          "[integration][run][containment]") {
  Scratch scratch;
  auto cohort = start_two_with_daemons(scratch, Mode{"default"}, {});
  pid_t keeper = keeper_of(cohort->pid());
  REQUIRE(keeper > 0);
  std::string proc = "/proc/" + std::to_string(keeper);
  CHECK(std::filesystem::read_symlink(proc + "/exe") ==
        std::filesystem::read_symlink("/proc/" + std::to_string(cohort->pid()) + "/exe"));
  CHECK(contains(read_file(proc + "/status"), "\nThreads:\t1\n"));
  CHECK(::getpgid(keeper) == keeper);  // a terminal's Ctrl-C reaches the agent only
  // Beyond stdin, stdout and stderr; not what the keeper itself opens in /proc for a moment (it
  // reads the agent's state at each tick, and what is below it), which a look may catch.
  std::vector<std::string> held;
  for (const auto& fd : std::filesystem::directory_iterator(proc + "/fd")) {
    std::error_code gone;  // closed since the listing
    std::string target = std::filesystem::read_symlink(fd.path(), gone).string();
    if (std::atoi(fd.path().filename().c_str()) > 2 && !gone && target.rfind("/proc/", 0) != 0)
      held.push_back(target);
  }
  INFO(cohort->output() << "held: " << cohort::join(held, ", "));
  REQUIRE(held.size() == 1);  // the agent's pipe: none of its sockets (the store's listener)
  CHECK(held[0].rfind("pipe:", 0) == 0);

  cohort->signal(SIGTERM);
  REQUIRE(cohort->wait(30s).has_value());
  CHECK(gone(keeper));
  CHECK(scratch.nothing_left());
}

// Waits up to `timeout` for child `pid` to end; its wait status, or nullopt (still running).
std::optional<int> reap(pid_t pid, std::chrono::milliseconds timeout) {
  int status = 0;
  if (wait_until([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, timeout)) return status;
  return std::nullopt;
}

// A `sleep 30` in a process group of its own, as a worker group the agent announced.
pid_t start_sleeping_group() {
  pid_t group = ::fork();
  if (group == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(group, group);
  return group;
}

// `cohort __keeper` on the pipe `fds` (its read end becomes the keeper's descriptor 3), for an
// agent that is already dead; the write end stays with the caller.
pid_t start_keeper_of_dead_agent(const int fds[2]) {
  std::string agent = std::to_string(dead_pid());
  pid_t keeper = ::fork();
  if (keeper == 0) {
    ::close(fds[1]);
    ::dup2(fds[0], 3);
    ::execl(kCohortBin, "cohort", "__keeper", "3", agent.c_str(), "3000", "2",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[0]);
  return keeper;
}

// Ends the pipe's write end, then checks that the keeper exits 0 and has SIGKILLed `group`.
void check_keeper_kills(int write_end, pid_t keeper, pid_t group) {
  ::close(write_end);
  std::optional<int> keeper_status = reap(keeper, 10s);
  if (!keeper_status) ::kill(keeper, SIGKILL);
  std::optional<int> group_status = reap(group, 10s);
  if (!group_status) ::kill(-group, SIGKILL);
  REQUIRE(keeper_status);
  CHECK((WIFEXITED(*keeper_status) && WEXITSTATUS(*keeper_status) == 0));
  REQUIRE(group_status);
  CHECK((WIFSIGNALED(*group_status) && WTERMSIG(*group_status) == SIGKILL));
}

TEST_CASE("a keeper whose agent died before it started kills what the agent told it of",
          "[integration][run][containment]") {
  // What an agent killed at once leaves: a worker group it announced, and the pipe's end.
  pid_t group = start_sleeping_group();
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::string said = "+" + std::to_string(group) + "\nt\n";
  REQUIRE(::write(fds[1], said.data(), said.size()) == static_cast<ssize_t>(said.size()));
  check_keeper_kills(fds[1], start_keeper_of_dead_agent(fds), group);
}

// The agent a shell ($$): it starts a child of its own (`sleep 30`) and its keeper (its child
// too, on a FIFO), leaves the keeper time to scan (it remembers the child as the agent's), closes
// its end of the pipe (the file `closed` says when), and exits 1.5 s later, as an agent at a clean
// exit does while LeakSanitizer's tracer, its child, checks for leaks.
constexpr const char* kAgentClosingItsPipe = R"(cd "$1" && mkfifo pipe || exit 1
sleep 30 & echo $! > child
"$0" __keeper 3 $$ 3000 2 3<pipe & echo $! > keeper
exec 4>pipe
printf 't\n' >&4
sleep 2
exec 4>&-
: > closed
sleep 1.5
)";

TEST_CASE("a keeper whose agent closes the pipe spares the agent's own child until it is gone",
          "[integration][run][containment]") {
  Scratch scratch;
  ChildProcess agent({"/bin/sh", "-c", kAgentClosingItsPipe, kCohortBin, scratch.path()},
                     scratch.options());
  REQUIRE(wait_until([&] { return file_exists(scratch.file("closed")); }, 10s));
  pid_t child = read_pid(scratch.file("child"));
  pid_t keeper = read_pid(scratch.file("keeper"));
  REQUIRE(child > 0);
  REQUIRE(keeper > 0);
  std::this_thread::sleep_for(500ms);
  CHECK(process_alive(child));  // the agent lives on: its child is not a worker's leftover
  CHECK(process_alive(keeper));
  auto status = agent.wait(10s);
  INFO(agent.output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 0);
  CHECK(gone(child));  // the agent is dead: what it left is killed
  CHECK(gone(keeper));
  ::kill(child, SIGKILL);
}

// The largest memory the process has held, in KiB (VmHWM); -1 if it is gone.
long peak_memory_kib(pid_t pid) {
  std::string status = read_file("/proc/" + std::to_string(pid) + "/status");
  size_t at = status.find("VmHWM:");
  return at == std::string::npos ? -1 : std::atol(status.c_str() + at + 6);
}

TEST_CASE("a keeper drops a line too long to be the agent's, and reads on",
          "[integration][run][containment]") {
  pid_t group = start_sleeping_group();
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t keeper = start_keeper_of_dead_agent(fds);
  // Once it has read its first line (the pipe is empty), what it holds is what it needs to run.
  REQUIRE(::write(fds[1], "t\n", 2) == 2);
  REQUIRE(wait_until([&] {
    int unread = -1;
    return ::ioctl(fds[1], FIONREAD, &unread) == 0 && unread == 0;
  }));
  long before = peak_memory_kib(keeper);
  // 64 MiB with no end of line, written as fast as the keeper reads (the pipe holds 64 KiB).
  const std::string junk(1 << 20, 'x');
  auto deadline = std::chrono::steady_clock::now() + 20s;
  size_t written = 0;
  while (written < 64 * junk.size() && std::chrono::steady_clock::now() < deadline) {
    ssize_t wrote = ::write(fds[1], junk.data(), junk.size());
    if (wrote > 0) written += static_cast<size_t>(wrote);
  }
  REQUIRE(written == 64 * junk.size());
  long after = peak_memory_kib(keeper);
  CHECK(before > 0);
  CHECK(after - before < 16 * 1024);  // it kept none of it
  std::string said =
      "\n+" + std::to_string(group) + "\nt\n";  // the long line ends; the next counts
  REQUIRE(::write(fds[1], said.data(), said.size()) == static_cast<ssize_t>(said.size()));
  check_keeper_kills(fds[1], keeper, group);
}

TEST_CASE("a keeper that stops reading never holds up its agent",
          "[integration][run][containment]") {
  Scratch scratch;
  auto cohort = scratch.start({"--nproc-per-node", "1", "--no-python", "/bin/sleep", "3"});
  pid_t keeper = 0;
  REQUIRE(wait_until([&] { return (keeper = keeper_of(cohort->pid())) > 0; }));
  ::kill(keeper, SIGSTOP);
  // Fill the pipe the agent ticks the keeper on, through the agent's own end of it.
  std::string pipe = std::filesystem::read_symlink("/proc/" + std::to_string(keeper) + "/fd/3");
  int filled = -1;
  for (const auto& fd :
       std::filesystem::directory_iterator("/proc/" + std::to_string(cohort->pid()) + "/fd")) {
    std::error_code error;
    if (std::filesystem::read_symlink(fd.path(), error).string() != pipe) continue;
    filled = ::open(fd.path().c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  }
  REQUIRE(filled >= 0);
  while (::write(filled, "t\n", 2) == 2) {
  }
  CHECK(errno == EAGAIN);
  ::close(filled);
  auto status = cohort->wait(20s);  // the agent ticks on, its workers end, so does it
  ::kill(keeper, SIGCONT);
  INFO(cohort->output());
  REQUIRE(status.has_value());
  CHECK(status->shell_code() == 0);
  CHECK(gone(keeper));
  CHECK(scratch.nothing_left());
}

TEST_CASE("cohort __keeper by hand is refused", "[integration][run][containment]") {
  Scratch scratch;
  for (std::vector<std::string> words :
       {std::vector<std::string>{kCohortBin, "__keeper"},
        {kCohortBin, "__keeper", "0", std::to_string(::getpid()), "3000", "2"},
        {kCohortBin, "__keeper", "3", "1", "3000", "2"}}) {
    RunResult result = scratch.run_argv(words, scratch.options(), 10s);
    INFO(result.err);
    CHECK(result.status.shell_code() == 2);
    CHECK(
        contains(result.err, "cohort __keeper: the group keeper is started by cohort run's agent"));
  }
}

TEST_CASE("an agent whose keeper a worker killed says so, and its run goes on",
          "[integration][run][containment]") {
  Scratch scratch;
  // The worker kills the agent's other child (its keeper: the only one with one worker), then
  // runs on past a few of the agent's ticks. Its $$ is written $$$$: the script's arguments are
  // expanded as torchrun's string.Template does, "$$" to "$".
  const std::string script =
      "for p in $(pgrep -P $PPID); do [ \"$p\" != $$$$ ] && kill -9 \"$p\"; done; sleep 3; exit 0";
  RunResult result =
      scratch.run({"--nproc-per-node", "1", "--no-python", "/bin/sh", "-c", script}, {}, 30s);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  CHECK(contains(result.err,
                 ") is gone: should this agent die now, its workers' own children "
                 "may outlive it"));
  CHECK(scratch.nothing_left());
}
