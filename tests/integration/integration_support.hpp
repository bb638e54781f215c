// Shared pieces of the `cohort run` integration tests: a per-test scratch area that starts the
// real cohort binary in a clean, marked environment, and readers for what test_worker leaves
// behind (env dumps, pid files, signal logs). Every process a test starts carries the scratch's
// marker in its environment, so a test can prove that none of them (agent, keeper, workers,
// grandchildren) outlives it. Test thread only.
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "process/worker_cgroups.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_paths.hpp"
#include "tests/support/wait_until.hpp"

extern char** environ;

namespace cohort::test {

using namespace std::chrono_literals;

using EnvDump = std::map<std::string, std::string>;

/// Variables of the test's own environment that would change how cohort or torchrun behave; every
/// run starts without them, and a test adds back what it is about.
inline bool influences_launcher(const std::string& name) {
  for (const char* prefix : {"PET_", "TORCHELASTIC_", "TORCH_ELASTIC_", "SLURM_"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  for (const char* exact :
       {"LOGLEVEL", "OMP_NUM_THREADS", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "NCCL_ASYNC_ERROR_HANDLING", "CUDA_VISIBLE_DEVICES", "PYTHON_EXEC", "MASTER_ADDR",
        "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "COHORT_TOKEN"}) {
    if (name == exact) return true;
  }
  return false;
}

/// The test's own environment as a map.
inline EnvDump own_environment() {
  EnvDump env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text(*entry);
    size_t equals = text.find('=');
    if (equals != std::string::npos) env[text.substr(0, equals)] = text.substr(equals + 1);
  }
  return env;
}

/// Reads a test_worker --dump-env file (a flat JSON object of strings).
inline EnvDump load_env(const std::string& path) {
  std::ifstream in(path);
  INFO("env dump " << path);
  REQUIRE(in.good());
  nlohmann::json parsed = nlohmann::json::parse(in);
  return parsed.get<EnvDump>();
}

/// The value of `name` in a dump, or "<unset>".
inline std::string env_value(const EnvDump& env, const std::string& name) {
  auto found = env.find(name);
  return found == env.end() ? "<unset>" : found->second;
}

inline pid_t read_pid(const std::string& path) {
  std::string text = read_file(path);
  return static_cast<pid_t>(std::atol(text.c_str()));
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// How many times `part` occurs in `text` (overlapping ones too).
inline size_t occurrences(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

inline bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// A port as MASTER_PORT carries it: a whole decimal number in 1..65535.
inline bool is_port(const std::string& text) {
  if (text.empty() || text.size() > 5) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  int port = std::atoi(text.c_str());
  return port >= 1 && port <= 65535;
}

/// 8-4-4-4-12 lowercase hex, as torchrun's and cohort's random run ids.
inline bool is_uuid_like(const std::string& text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    char c = text[i];
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

/// What cohort's and torchrun's workers are compared on: `variables` (torchrun's own) and every
/// variable either launcher sets on top of the environment it was `given` (test_worker's own
/// fields, __pid and __stdin, aside).
inline std::set<std::string> variables_to_compare(const std::vector<std::string>& variables,
                                                  const EnvDump& given, const EnvDump& ours,
                                                  const EnvDump& theirs) {
  std::set<std::string> names(variables.begin(), variables.end());
  for (const EnvDump* dump : {&ours, &theirs}) {
    for (const auto& [name, value] : *dump) {
      if (name.rfind("__", 0) == 0) continue;
      auto found = given.find(name);
      if (found == given.end() || found->second != value) names.insert(name);
    }
  }
  return names;
}

/// Checks variable `name` of local rank `local_rank` if it differs between cohort and torchrun by
/// design in every PyTorch release, and says whether it did: MASTER_PORT (a free port each),
/// TORCHELASTIC_RUN_ID (a random uuid each), TORCHELASTIC_ERROR_FILE (the base directory differs;
/// both end in attempt_0/<local rank>/error.json), COHORT_HEARTBEAT_FD (cohort's own: a small
/// number).
inline bool checked_difference_by_design(const std::string& name, const std::string& cohort,
                                         const std::string& torchrun, int local_rank) {
  const std::string error_file = "/attempt_0/" + std::to_string(local_rank) + "/error.json";
  if (name == "MASTER_PORT") {
    CHECK(is_port(cohort));
    CHECK(is_port(torchrun));
  } else if (name == "TORCHELASTIC_RUN_ID") {
    CHECK(is_uuid_like(cohort));
    CHECK(is_uuid_like(torchrun));
  } else if (name == "TORCHELASTIC_ERROR_FILE") {
    CHECK(ends_with(cohort, error_file));
    CHECK(ends_with(torchrun, error_file));
  } else if (name == "COHORT_HEARTBEAT_FD") {
    CHECK(is_port(cohort));
    CHECK(torchrun == "<unset>");
  } else {
    return false;
  }
  return true;
}

/// The command of one of `nodes` torchrun agents, one worker each, that meet at a c10d rendezvous
/// on `endpoint` (an external store: no agent hosts it): `torchrun` (how to start it), then its
/// flags, the worker test_worker dumping its environment to `dump_file` ({RANK}: its rank).
inline std::vector<std::string> torchrun_c10d_argv(std::vector<std::string> torchrun, int nodes,
                                                   const std::string& endpoint,
                                                   const std::string& dump_file) {
  std::vector<std::string> flags{"--nnodes",           std::to_string(nodes),
                                 "--nproc_per_node",   "1",
                                 "--rdzv_backend",     "c10d",
                                 "--rdzv_endpoint",    endpoint,
                                 "--rdzv_conf",        "is_host=false",
                                 "--rdzv_id",          "external",
                                 "--monitor_interval", "0.1",
                                 "--no_python",        kTestWorkerBin,
                                 "--dump-env",         dump_file};
  torchrun.insert(torchrun.end(), flags.begin(), flags.end());
  return torchrun;
}

/// cohort's failure summary: everything on stderr from its first "=====" ruler on.
inline std::string failure_summary(const std::string& err) {
  size_t start = err.find(std::string(60, '='));
  return start == std::string::npos ? std::string() : err.substr(start);
}

/// Writes an executable /bin/sh script.
inline void write_script(const std::string& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
}

/// Live (non-zombie) processes whose environment holds `marker` (NAME=value).
inline std::vector<pid_t> processes_with(const std::string& marker) {
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = ::readdir(proc)) {
    pid_t pid = static_cast<pid_t>(std::atol(entry->d_name));
    if (pid <= 0 || pid == ::getpid()) continue;
    std::string environment = read_file("/proc/" + std::string(entry->d_name) + "/environ");
    std::string wrapped = std::string(1, '\0') + environment + std::string(1, '\0');
    std::string needle = std::string(1, '\0') + marker + std::string(1, '\0');
    if (contains(wrapped, needle) && process_alive(pid)) found.push_back(pid);
  }
  ::closedir(proc);
  return found;
}

/// Whether `signal` is in a /proc status mask of `pid` (of a thread: `status_path`), e.g.
/// "SigCgt" (caught), "SigIgn" (ignored), "SigBlk" (blocked); false once the process is gone.
inline bool in_signal_mask(const std::string& status_path, const std::string& field, int signal) {
  std::string status = read_file(status_path);
  size_t at = status.find(field + ":\t");
  if (at == std::string::npos) return false;
  uint64_t mask = std::stoull(status.substr(at + field.size() + 2, 16), nullptr, 16);
  return (mask >> (signal - 1)) & 1;
}
inline bool in_signal_mask(pid_t pid, const std::string& field, int signal) {
  return in_signal_mask("/proc/" + std::to_string(pid) + "/status", field, signal);
}

/// The state letter of /proc/PID/stat ('T': stopped); empty once it is gone.
inline std::string process_state(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? "" : stat.substr(close + 2, 1);
}

/// Whether the cgroup (v2) of `pid` is frozen: its cgroup.events says "frozen 1".
inline bool cgroup_frozen(pid_t pid) {
  std::string why;
  std::string path =
      cohort::unified_cgroup_path(read_file("/proc/" + std::to_string(pid) + "/cgroup"), why);
  if (path.empty()) return false;
  std::string directory = cohort::cgroup2_directory(read_file("/proc/self/mountinfo"), path, why);
  return !directory.empty() && contains(read_file(directory + "/cgroup.events"), "frozen 1");
}

/// Paused as Ctrl-Z pauses a worker: stopped (SIGSTOP; 'T'), or frozen with its cgroup, which
/// may come first and hold the SIGSTOP pending.
inline bool paused(pid_t pid) { return process_state(pid) == "T" || cgroup_frozen(pid); }

/// Ctrl-Z: `cohort` stopped by SIGTSTP for `pause`, then SIGCONT; its exit status (none if it did
/// not end within 30 s).
inline std::optional<ExitStatus> pause_then_wait(ChildProcess& cohort,
                                                 std::chrono::milliseconds pause) {
  cohort.signal(SIGTSTP);
  REQUIRE(wait_until([&] { return process_state(cohort.pid()) == "T"; }));
  std::this_thread::sleep_for(pause);
  cohort.signal(SIGCONT);
  return cohort.wait(std::chrono::seconds(30));
}

/// "pid state ppid pgid cmdline" of each process, for a failing check's message.
inline std::string describe_processes(const std::vector<pid_t>& pids) {
  std::string text;
  for (pid_t pid : pids) {
    std::string proc = "/proc/" + std::to_string(pid);
    std::string stat = read_file(proc + "/stat");
    size_t close = stat.rfind(')');
    std::string fields = close == std::string::npos ? stat : stat.substr(close + 2);
    std::istringstream in(fields);
    std::string state, ppid, pgid;
    in >> state >> ppid >> pgid;
    std::string cmdline = read_file(proc + "/cmdline");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    text += std::to_string(pid) + " state=" + state + " ppid=" + ppid + " pgid=" + pgid + " " +
            cmdline + "\n";
  }
  return text;
}

/// One test's working area: a temporary directory (also the runs' working directory and TMPDIR)
/// and a marker that every process started from here inherits.
class Scratch {
 public:
  Scratch() {
    std::random_device device;
    marker_ = "COHORT_TEST_MARKER=" + std::to_string(::getpid()) + "_" + std::to_string(device()) +
              std::to_string(device());
    ::mkdir(tmp().c_str(), 0755);
  }

  const std::string& path() const { return dir_.path(); }
  std::string file(const std::string& name) const { return dir_.file(name); }
  std::string tmp() const { return dir_.file("tmp"); }

  /// A clean environment: the test's own minus what steers a launcher, plus the marker and a
  /// private TMPDIR; `env` is added on top.
  ChildOptions options(const std::map<std::string, std::string>& env = {}) const {
    ChildOptions options;
    for (const auto& [name, value] : own_environment()) {
      if (influences_launcher(name)) options.unset_env.push_back(name);
    }
    size_t equals = marker_.find('=');
    options.env[marker_.substr(0, equals)] = marker_.substr(equals + 1);
    options.env["TMPDIR"] = tmp();
    options.env["PWD"] = path();  // the working directory below, as a shell would say
    for (const auto& [name, value] : env) options.env[name] = value;
    options.working_dir = path();
    options.output_dir = path();
    options.name = "cohort";
    return options;
  }

  /// The environment a process started with `options` sees.
  static EnvDump environment_of(const ChildOptions& options) {
    EnvDump env = own_environment();
    for (const auto& name : options.unset_env) env.erase(name);
    for (const auto& [name, value] : options.env) env[name] = value;
    return env;
  }

  /// `cohort run ARGS...` to its end.
  RunResult run(const std::vector<std::string>& args,
                const std::map<std::string, std::string>& env = {},
                std::chrono::milliseconds timeout = 60s) const {
    return run_argv(cohort_argv(args), options(env), timeout);
  }

  RunResult run_argv(const std::vector<std::string>& argv, ChildOptions options,
                     std::chrono::milliseconds timeout = 60s) const {
    return run_to_end(argv, std::move(options), timeout);
  }

  /// `cohortd` on loopback with a plain TCPStore (--tcpstore-port) on a free port; sets
  /// `endpoint` to "127.0.0.1:PORT" of that store. The guard kills it at scope exit.
  /// `wrapper`: a program that runs cohortd (its arguments first); `flags`: more of cohortd's.
  std::unique_ptr<ChildProcess> start_tcpstore_daemon(
      std::string& endpoint, const std::vector<std::string>& wrapper = {},
      const std::vector<std::string>& flags = {}) const {
    std::string port_file = file("tcpstore_port");
    ChildOptions daemon_options = options();
    daemon_options.name = "cohortd";
    std::vector<std::string> argv = wrapper;
    std::vector<std::string> daemon_argv{
        kCohortdBin, "--host",          "127.0.0.1", "--port",
        "0",         "--tcpstore-port", "0",         "--tcpstore-port-file",
        port_file};
    argv.insert(argv.end(), daemon_argv.begin(), daemon_argv.end());
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto daemon = std::make_unique<ChildProcess>(argv, daemon_options);
    REQUIRE(wait_until([&] { return file_exists(port_file); }, 10s));
    endpoint = "127.0.0.1:" + std::to_string(std::atoi(read_file(port_file).c_str()));
    return daemon;
  }

  /// `cohort run ARGS...` in the background; the guard kills its process group at scope exit.
  std::unique_ptr<ChildProcess> start(const std::vector<std::string>& args,
                                      const std::map<std::string, std::string>& env = {}) const {
    return std::make_unique<ChildProcess>(cohort_argv(args), options(env));
  }

  static std::vector<std::string> cohort_argv(const std::vector<std::string>& args) {
    std::vector<std::string> argv{kCohortBin, "run"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  /// Processes started from this scratch that are still alive.
  std::vector<pid_t> leftovers() const { return processes_with(marker_); }

  /// True once nothing started from here is alive (waits a little for exiting helpers); else
  /// says what is left.
  bool nothing_left(std::chrono::milliseconds timeout = 10s) const {
    if (wait_until([&] { return leftovers().empty(); }, timeout)) return true;
    UNSCOPED_INFO("left behind:\n" << describe_processes(leftovers()));
    return false;
  }

 private:
  TempDir dir_;
  std::string marker_;
};

/// The seed of a test's random stop moments: COHORT_STOP_SEED (to replay a failure), else fresh.
inline unsigned stop_seed() {
  const char* given = std::getenv("COHORT_STOP_SEED");
  return given ? static_cast<unsigned>(std::strtoul(given, nullptr, 10)) : std::random_device{}();
}

/// Files under `dir` (names only) that start with `prefix`.
inline std::vector<std::string> entries_starting_with(const std::string& dir,
                                                      const std::string& prefix) {
  std::vector<std::string> names;
  DIR* handle = ::opendir(dir.c_str());
  if (handle == nullptr) return names;
  while (dirent* entry = ::readdir(handle)) {
    std::string name = entry->d_name;
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  ::closedir(handle);
  return names;
}

/// The directory a `cohort run` made for run `run_id` under `log_dir`, torchrun's
/// <run-id>_<random>: the one such entry there, else "" (none, or several runs of that id).
inline std::string run_log_dir(const std::string& log_dir, const std::string& run_id) {
  std::vector<std::string> found = entries_starting_with(log_dir, run_id + "_");
  return found.size() == 1 ? log_dir + "/" + found[0] : std::string();
}

/// Fails the test, naming what is missing and how to get it, unless `present`. scripts/setup
/// installs every prerequisite of the tests (torch, Slurm, sshd, ...), so a missing one is a
/// failure, never a silent skip.
inline void require_prerequisite(bool present, const std::string& what) {
  if (!present) FAIL("missing prerequisite: " << what);
}

inline const std::string kPython = "/usr/bin/python3";

/// True when Debian's python3 can import torch.distributed.
inline bool python_has_torch() {
  static const bool has = [] {
    Scratch scratch;
    try {
      RunResult result =
          scratch.run_argv({kPython, "-c", "import torch.distributed.run"}, scratch.options(), 60s);
      return result.status.success();
    } catch (const std::exception&) {
      return false;
    }
  }();
  return has;
}

inline void require_torch() {
  require_prerequisite(python_has_torch(),
                       kPython + " with torch (scripts/setup installs python3-torch)");
}

// torch 1.13's TCPStore server (torchrun's rendezvous store on the fixed port 29400, and rank 0's
// store in init_process_group) listens on the wildcard address. Where the machine allows it, such
// commands run in a private network namespace that has only a loopback interface: nothing they
// open is reachable from outside, and port 29400 cannot clash with anything else on the machine.
inline bool private_network_available() {
  static const bool available = [] {
    Scratch scratch;
    try {
      return scratch
          .run_argv({"/usr/bin/unshare", "-n", "/usr/sbin/ip", "link", "set", "lo", "up"},
                    scratch.options(), 30s)
          .status.success();
    } catch (const std::exception&) {
      return false;
    }
  }();
  return available;
}

inline std::vector<std::string> loopback_only(const std::vector<std::string>& argv) {
  require_prerequisite(private_network_available(),
                       "a private network namespace (unshare -n, as root) for torch's stores, "
                       "which bind the wildcard address");
  std::vector<std::string> wrapped{"/usr/bin/unshare",
                                   "-n",
                                   "/bin/sh",
                                   "-c",
                                   "/usr/sbin/ip link set lo up && exec \"$@\"",
                                   "sh"};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

}  // namespace cohort::test
