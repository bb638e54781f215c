// A real Slurm cluster on this one machine, for the tests of cohort under Slurm: munged,
// slurmctld and several `slurmd -N nodeK`, all inside a network namespace that the test creates
// (their wildcard listeners are reachable from nowhere else), with node names resolved through a
// hosts file bind-mounted over /etc/hosts in the cluster's own mount namespaces only. Every
// daemon, job and worker carries the scratch's marker; the destructor kills them all and removes
// the namespace, also when a check failed. Test thread only.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <thread>

#include "tests/integration/integration_support.hpp"

namespace cohort::test {

inline const std::string kSlurmctld = "/usr/sbin/slurmctld";
inline const std::string kSlurmd = "/usr/sbin/slurmd";
inline const std::string kMunged = "/usr/sbin/munged";

inline bool slurm_installed() { return ::access(kSlurmctld.c_str(), X_OK) == 0; }

/// Polls `condition` every `interval` until it holds or `timeout` passes (for conditions that
/// run a command, unlike wait_until's 5 ms loop).
inline bool poll_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds interval = std::chrono::milliseconds(250)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(interval);
  }
  return true;
}

/// `name=value` of one field in `scontrol show job -o` output ("" when absent).
inline std::string slurm_field(const std::string& record, const std::string& name) {
  std::string key = " " + name + "=";
  std::string padded = " " + record;
  size_t start = padded.find(key);
  if (start == std::string::npos) return {};
  start += key.size();
  size_t end = padded.find_first_of(" \n", start);
  return padded.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

inline bool run_quietly(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

/// The NUL-separated fields of /proc/PID/FILE (cmdline, environ).
inline std::vector<std::string> proc_fields(pid_t pid, const std::string& file) {
  std::string text = read_file("/proc/" + std::to_string(pid) + "/" + file);
  std::vector<std::string> fields;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    fields.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return fields;
}

inline bool is_cohort_run(pid_t pid) {
  std::vector<std::string> argv = proc_fields(pid, "cmdline");
  return argv.size() >= 2 && argv[0] == kCohortBin && argv[1] == "run";
}

/// The `cohort run` agent of job `job` on node `node`; 0 if there is none.
inline pid_t cohort_agent(const std::string& job, const std::string& node) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = static_cast<pid_t>(std::atol(entry.path().filename().c_str()));
    if (pid <= 0 || !is_cohort_run(pid)) continue;
    std::vector<std::string> env = proc_fields(pid, "environ");
    auto has = [&](const std::string& item) {
      return std::find(env.begin(), env.end(), item) != env.end();
    };
    if (has("SLURM_JOB_ID=" + job) && has("SLURMD_NODENAME=" + node)) return pid;
  }
  return 0;
}

/// True when `pid` holds a TCP socket listening on `port` (read in its own network namespace).
inline bool listens_on(pid_t pid, int port) {
  std::string proc = "/proc/" + std::to_string(pid);
  std::vector<std::string> inodes;
  for (const char* table : {"/net/tcp", "/net/tcp6"}) {
    std::vector<std::string> lines = split_lines(read_file(proc + table));
    for (size_t i = 1; i < lines.size(); ++i) {
      std::istringstream in(lines[i]);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      in >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >>
          inode;
      size_t colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") continue;
      if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) inodes.push_back(inode);
    }
  }
  std::error_code error;
  for (const auto& fd : std::filesystem::directory_iterator(proc + "/fd", error)) {
    std::string target = std::filesystem::read_symlink(fd.path(), error).string();
    for (const auto& inode : inodes) {
      if (target == "socket:[" + inode + "]") return true;
    }
  }
  return false;
}

/// The cluster: node1..nodeN at 127.0.0.11.., two fake GPUs per node (gres/gpu on /dev/null and
/// /dev/zero, so SLURM_GPUS_ON_NODE and CUDA_VISIBLE_DEVICES are set as on a GPU node).
class SlurmCluster {
 public:
  SlurmCluster(Scratch& scratch, int nodes) : scratch_(scratch), nodes_(nodes) {
    ::chmod(scratch_.path().c_str(), 0755);  // munged wants its socket's directories searchable
    namespace_ = "cohort_slurm_" + std::to_string(::getpid());
    dir_ = scratch_.file("slurm");
    for (const char* sub : {"", "/munge", "/state", "/log"}) ::mkdir((dir_ + sub).c_str(), 0755);
    created_namespace_ = make_namespace();
    if (!created_namespace_) return;
    write_config();
    ready_ = start_daemons();
  }
  ~SlurmCluster() { stop(); }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  /// True once every node is idle; else logs() says why.
  bool ready() const { return ready_; }
  std::string node(int k) const { return "node" + std::to_string(k); }
  std::string conf() const { return dir_ + "/slurm.conf"; }

  /// `argv` as run inside the cluster: its network namespace and its hosts file.
  std::vector<std::string> inside(const std::vector<std::string>& argv) const {
    std::vector<std::string> wrapped{dir_ + "/in-cluster"};
    wrapped.insert(wrapped.end(), argv.begin(), argv.end());
    return wrapped;
  }

  /// The scratch's clean environment plus what Slurm clients, cohort and Gloo need here.
  ChildOptions options(const std::map<std::string, std::string>& env = {}) const {
    std::map<std::string, std::string> all{{"SLURM_CONF", conf()},
                                           {"GLOO_SOCKET_IFNAME", "lo"},
                                           {"PYTHON_EXEC", kPython},
                                           {"COHORT", kCohortBin}};
    for (const auto& [name, value] : env) all[name] = value;
    ChildOptions options = scratch_.options(all);
    options.name = "slurm_client";
    return options;
  }

  /// A Slurm client command (sbatch, scontrol, scancel, sinfo) to its end.
  RunResult client(const std::vector<std::string>& argv,
                   const std::map<std::string, std::string>& env = {},
                   std::chrono::milliseconds timeout = 30s) const {
    ChildOptions options = this->options(env);
    options.output_dir = dir_ + "/log";  // not the job's working directory
    return run_to_end(inside(argv), options, timeout);
  }

  /// `sbatch --parsable ARGS...`; the job id.
  std::string submit(const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env = {}) const {
    std::vector<std::string> argv{"sbatch", "--parsable"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult result = client(argv, env);
    INFO("sbatch: " << result.out << result.err);
    REQUIRE(result.status.success());
    std::string id = result.out.substr(0, result.out.find_first_of(";\n"));
    REQUIRE(!id.empty());
    return id;
  }

  /// `scontrol show job -o ID` (one line of Name=value fields; "" if unknown).
  std::string job(const std::string& id) const {
    RunResult result = client({"scontrol", "show", "job", "-o", id});
    return result.status.success() ? result.out : std::string();
  }
  std::string job_field(const std::string& id, const std::string& name) const {
    return slurm_field(job(id), name);
  }

  /// True while the job is queued or running (not ended, not unknown).
  bool job_active(const std::string& id) const {
    std::string state = job_field(id, "JobState");
    for (const char* active : {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED"}) {
      if (state == active) return true;
    }
    return false;
  }

  /// Waits until the job has ended (any final state); its JobState, or "" on timeout.
  std::string wait_for_end(const std::string& id, std::chrono::milliseconds timeout) const {
    std::string state;
    auto ended = [&] {
      state = job_field(id, "JobState");
      for (const char* final : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                                "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}) {
        if (state == final) return true;
      }
      return false;
    };
    return poll_until(ended, timeout) ? state : std::string();
  }

  /// The daemons' logs, for a failing check's message.
  std::string logs() const {
    std::string text = "--- munged\n" + tail(dir_ + "/munge/log");
    text += "--- slurmctld.log\n" + tail(dir_ + "/log/slurmctld.log");
    for (int k = 1; k <= nodes_; ++k) {
      text += "--- slurmd-" + node(k) + ".log\n" + tail(dir_ + "/log/slurmd-" + node(k) + ".log");
    }
    return text;
  }

  /// Cancels every job, kills every process started from the scratch (daemons, job steps,
  /// agents, workers) and removes the namespace. Idempotent.
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    try {
      if (slurmctld_) client({"scancel", "--user=root"}, {}, 10s);
    } catch (const std::exception&) {
      // killed below anyway
    }
    for (pid_t pid : scratch_.leftovers()) ::kill(pid, SIGKILL);
    slurmds_.clear();
    slurmctld_.reset();
    munged_.reset();
    wait_until([&] { return scratch_.leftovers().empty(); }, 10s);
    if (created_namespace_) run_quietly("/usr/sbin/ip netns del " + namespace_);
  }

 private:
  static std::string tail(const std::string& path, size_t bytes = 3000) {
    std::string text = read_file(path);
    return text.size() > bytes ? text.substr(text.size() - bytes) : text;
  }

  // A private network with only loopback. 10.231.255.1 on lo is there for glibc: without any
  // non-loopback IPv4 address, getaddrinfo(AI_ADDRCONFIG) (used by Slurm) resolves nothing.
  bool make_namespace() {
    std::string ns = "/usr/sbin/ip netns exec " + namespace_ + " /usr/sbin/ip ";
    return run_quietly("/usr/sbin/ip netns add " + namespace_) &&
           run_quietly(ns + "link set lo up") &&
           run_quietly(ns + "addr add 10.231.255.1/32 dev lo");
  }

  std::string hostname() const {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    std::string text = name;
    return text.substr(0, text.find('.'));  // Slurm compares the short name
  }

  void write_config() {
    std::ofstream hosts(dir_ + "/hosts");
    hosts << "127.0.0.1 localhost " << hostname() << "\n";
    for (int k = 1; k <= nodes_; ++k) hosts << "127.0.0.1" << k << " " << node(k) << "\n";
    // nsenter keeps the machine's /sys (slurmd needs its cgroup mounts), unlike `ip netns exec`.
    std::ofstream(dir_ + "/in-cluster")
        << "#!/bin/sh\nexec /usr/bin/nsenter --net=/run/netns/" << namespace_
        << " /usr/bin/unshare --mount --propagation private /bin/sh -c 'mount --bind " << dir_
        << "/hosts /etc/hosts && exec \"$@\"' sh \"$@\"\n";
    ::chmod((dir_ + "/in-cluster").c_str(), 0755);
    std::ofstream(dir_ + "/gres.conf") << "AutoDetect=off\nName=gpu File=/dev/null\n"
                                          "Name=gpu File=/dev/zero\n";
    std::ofstream(dir_ + "/slurm.conf") << slurm_conf();
    std::ofstream key(dir_ + "/munge/munge.key");
    std::random_device random;
    for (int i = 0; i < 1024; ++i) key.put(static_cast<char>(random()));
    key.close();
    ::chmod((dir_ + "/munge/munge.key").c_str(), 0600);
  }

  std::string slurm_conf() const {
    std::ostringstream conf;
    conf << "ClusterName=cohorttest\nSlurmctldHost=" << hostname() << "(127.0.0.1)\n"
         << "SlurmctldPort=6817\nSlurmdPort=6818\nSlurmUser=root\nSlurmdUser=root\n"
         << "AuthType=auth/munge\nCredType=cred/munge\n"
         << "AuthInfo=socket=" << dir_ << "/munge/socket,cred_expire=10\n"
         << "StateSaveLocation=" << dir_ << "/state\nSlurmdSpoolDir=" << dir_ << "/spool-%n\n"
         << "SlurmctldPidFile=" << dir_ << "/slurmctld.pid\n"
         << "SlurmdPidFile=" << dir_ << "/slurmd-%n.pid\n"
         << "SlurmctldLogFile=" << dir_ << "/log/slurmctld.log\n"
         << "SlurmdLogFile=" << dir_ << "/log/slurmd-%n.log\n"
         << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
         << "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
         << "JobCompType=jobcomp/none\nMpiDefault=none\nMailProg=/bin/true\n"
         << "SchedulerType=sched/builtin\nSchedulerParameters=sched_interval=1\n"
         << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
         << "SlurmdParameters=config_overrides\nGresTypes=gpu\nReturnToService=2\n"
         << "SlurmctldTimeout=10\nSlurmdTimeout=10\nMessageTimeout=5\nKillWait=5\n"
         << "InactiveLimit=0\nMinJobAge=600\n";
    for (int k = 1; k <= nodes_; ++k) {
      conf << "NodeName=" << node(k) << " NodeAddr=127.0.0.1" << k << " Port=" << 6820 + k
           << " CPUs=4 RealMemory=2000 Gres=gpu:2 State=UNKNOWN\n";
    }
    conf << "PartitionName=test Nodes=node[1-" << nodes_ << "] Default=YES MaxTime=10 State=UP\n";
    return conf.str();
  }

  std::unique_ptr<ChildProcess> daemon(const std::string& name,
                                       const std::vector<std::string>& argv) {
    ChildOptions options = this->options();
    options.output_dir = dir_ + "/log";
    options.name = name;
    return std::make_unique<ChildProcess>(inside(argv), options);
  }

  bool start_daemons() {
    std::string munge = dir_ + "/munge/";
    munged_ = daemon("munged", {kMunged, "-F", "--socket=" + munge + "socket",
                                "--key-file=" + munge + "munge.key", "--log-file=" + munge + "log",
                                "--pid-file=" + munge + "pid", "--seed-file=" + munge + "seed"});
    if (!wait_until([&] { return file_exists(munge + "socket"); }, 10s)) return false;
    slurmctld_ = daemon("slurmctld", {kSlurmctld, "-D", "-i", "-f", conf()});
    for (int k = 1; k <= nodes_; ++k) {
      ::mkdir((dir_ + "/spool-" + node(k)).c_str(), 0755);
      slurmds_.push_back(daemon("slurmd_" + node(k), {kSlurmd, "-D", "-f", conf(), "-N", node(k)}));
    }
    return poll_until([&] { return idle_nodes() == nodes_; }, 60s);
  }

  int idle_nodes() const {
    RunResult result = client({"sinfo", "-h", "-N", "-o", "%t"}, {}, 10s);
    int idle = 0;
    for (const auto& line : split_lines(result.out)) idle += line == "idle" ? 1 : 0;
    return idle;
  }

  Scratch& scratch_;
  int nodes_;
  std::string namespace_, dir_;
  bool created_namespace_ = false, ready_ = false, stopped_ = false;
  std::unique_ptr<ChildProcess> munged_, slurmctld_;
  std::vector<std::unique_ptr<ChildProcess>> slurmds_;
};

}  // namespace cohort::test
