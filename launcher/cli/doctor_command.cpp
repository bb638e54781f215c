#include "launcher/cli/doctor_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/torch_probe.hpp"
#include "agent/worker_env.hpp"
#include "common/exit_codes.hpp"
#include "common/fd_wait.hpp"
#include "common/host_port.hpp"
#include "common/run_id.hpp"
#include "common/text.hpp"
#include "launcher/tokens/slurm_token.hpp"
#include "launcher/tokens/token_source.hpp"
#include "launcher/topology/hwloc_topology.hpp"
#include "launcher/topology/visible_gpus.hpp"
#include "process/process_spawner.hpp"
#include "process/worker_cgroups.hpp"

extern char** environ;

namespace cohort {

void add_doctor_flags(CLI::App& app, DoctorOptions& options) {
  app.add_option("--rdzv-endpoint,--rdzv_endpoint", options.endpoint,
                 "host[:port] of a rendezvous daemon to check: reachable, a cohort daemon, the "
                 "token accepted (default: no such check)");
  app.add_option("--token-file", options.token_file,
                 "The daemon's token, or with --rdzv-id the run's, for --rdzv-endpoint (default: "
                 "$COHORT_TOKEN)");
  app.add_option("--rdzv-id,--rdzv_id", options.run_id,
                 "The run whose token --token-file holds (a run's token proves that run only)");
  app.add_option("--expect-ranks", options.expect_ranks,
                 "Check RLIMIT_NOFILE against what a daemon for N ranks needs")
      ->capture_default_str();
  app.add_flag("--json", options.json,
               "Print the checks as JSON: {\"checks\": [{name, level, detail, advice}], \"ok\", "
               "\"warn\", \"fail\": counts}");
  app.footer(
      "One line per check: ok, warn or FAIL, what it found and, when not ok, what to do. Exit "
      "status: 0 when no check FAILed, 1 when one did, 2 for a bad flag.");
}

std::string level_word(CheckLevel level) {
  switch (level) {
    case CheckLevel::kOk:
      return "ok";
    case CheckLevel::kWarn:
      return "warn";
    case CheckLevel::kFail:
      return "FAIL";
  }
  return "?";
}

std::string format_check_line(const CheckResult& check) {
  std::string level = level_word(check.level);
  std::string name = check.name;
  level.resize(std::max<size_t>(level.size(), 5), ' ');
  name.resize(std::max<size_t>(name.size(), 21), ' ');
  std::string line = level + " " + name + " " + check.detail;
  if (check.level != CheckLevel::kOk && !check.advice.empty()) line += "; to fix: " + check.advice;
  return line;
}

std::string checks_json(const std::vector<CheckResult>& checks) {
  nlohmann::json list = nlohmann::json::array();
  std::map<CheckLevel, int> counts;
  for (const CheckResult& check : checks) {
    ++counts[check.level];
    list.push_back({{"name", check.name},
                    {"level", level_word(check.level)},
                    {"detail", check.detail},
                    {"advice", check.advice}});
  }
  nlohmann::json document{{"checks", list},
                          {"ok", counts[CheckLevel::kOk]},
                          {"warn", counts[CheckLevel::kWarn]},
                          {"fail", counts[CheckLevel::kFail]}};
  // A detail may quote what the environment holds (CUDA_VISIBLE_DEVICES, a path), in any bytes.
  return document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

int doctor_exit_code(const std::vector<CheckResult>& checks) {
  for (const CheckResult& check : checks) {
    if (check.level == CheckLevel::kFail) return 1;
  }
  return 0;
}

long descriptors_for_ranks(long ranks) { return 2 * ranks + 64; }

CheckResult judge_fd_limit(long soft, long hard, long ranks, bool ranks_given, long nr_open) {
  long needed = descriptors_for_ranks(ranks);
  std::string limits = cat("soft ", soft, ", hard ", hard);
  std::string need = cat("a daemon for ", ranks, " ranks needs ", needed,
                         " (one per worker and per agent, plus 64)");
  if (needed <= soft) return {"RLIMIT_NOFILE", CheckLevel::kOk, cat(limits, ": ", need), ""};
  if (needed <= hard) {
    return {"RLIMIT_NOFILE", CheckLevel::kOk,
            cat(limits, ": ", need, "; cohortd raises its soft limit to the hard one"), ""};
  }
  std::string kernel_first = nr_open > 0 && needed > nr_open
                                 ? cat("no limit may pass the kernel's fs.nr_open, ", nr_open,
                                       " here: first `sysctl -w fs.nr_open=", needed,
                                       "` (fs.nr_open in /etc/sysctl.d), then ")
                                 : "";
  return {"RLIMIT_NOFILE", ranks_given ? CheckLevel::kFail : CheckLevel::kWarn,
          cat(limits, ": ", need),
          cat(kernel_first, "raise the hard limit where cohortd starts: `ulimit -Hn ", needed,
              "` (nofile in /etc/security/limits.conf) or LimitNOFILE=", needed,
              " in its systemd unit")};
}

namespace {

CheckLevel worse(CheckLevel a, CheckLevel b) { return std::max(a, b); }

// "1 socket", "2 sockets".
std::string counted(size_t count, const std::string& thing) {
  return cat(count, " ", thing, count == 1 ? "" : "s");
}

}  // namespace

CheckResult judge_nvml(const std::optional<std::vector<GpuState>>& gpus,
                       const std::optional<std::string>& driver) {
  if (!gpus) {
    return {"nvml", CheckLevel::kWarn,
            "no NVML (libnvidia-ml.so.1 missing or nvmlInit failed): no GPU checks",
            "on a GPU node, install or repair the NVIDIA driver (nvidia-smi should work)"};
  }
  std::string found =
      cat("driver ", driver.value_or("of unknown version"), ", ", counted(gpus->size(), "GPU"));
  if (gpus->empty()) {
    return {"nvml", CheckLevel::kWarn, found,
            "NVML answers but sees no GPU: check the driver (nvidia-smi) and the devices"};
  }
  return {"nvml", CheckLevel::kOk, found, ""};
}

namespace {

// "pid 4242 (python3), pid 4243": the processes holding a GPU.
std::string holders(const std::vector<pid_t>& pids, const std::map<pid_t, std::string>& names) {
  std::vector<std::string> parts;
  for (pid_t pid : pids) {
    auto name = names.find(pid);
    parts.push_back(cat("pid ", pid) + (name == names.end() ? "" : " (" + name->second + ")"));
  }
  return join(parts, ", ");
}

}  // namespace

CheckResult judge_gpu(const GpuState& gpu, const std::map<pid_t, std::string>& names) {
  CheckResult check{cat("gpu ", gpu.index), CheckLevel::kOk, gpu.bus_id, ""};
  std::vector<std::string> found{gpu.bus_id};
  std::vector<std::string> advice;
  std::string reset = cat("drain the node and reset the GPU (nvidia-smi -r -i ", gpu.index,
                          ") or reboot; replace it if this comes back");
  if (!gpu.ecc_enabled) found.push_back("no ECC");
  if (gpu.ecc_enabled && !*gpu.ecc_enabled) {
    found.push_back("ECC off");
    check.level = worse(check.level, CheckLevel::kWarn);
    advice.push_back(cat("turn ECC on: nvidia-smi -e 1 -i ", gpu.index, ", then reset the GPU"));
  }
  if (gpu.ecc_enabled.value_or(false)) found.push_back("ECC on");
  if (gpu.uncorrected_ecc > 0) {
    found.push_back(cat(gpu.uncorrected_ecc, " uncorrectable ECC errors since the driver loaded"));
    check.level = CheckLevel::kFail;
  }
  if (gpu.memory_repair_pending) {
    found.push_back("a row remap or page retirement waits for a GPU reset");
    check.level = CheckLevel::kFail;
  }
  if (check.level == CheckLevel::kFail) advice.insert(advice.begin(), reset);
  if (gpu.processes.empty()) {
    found.push_back("no process holds it");
  } else {
    found.push_back("held by " + holders(gpu.processes, names));
    check.level = worse(check.level, CheckLevel::kWarn);
    advice.push_back("see what runs there (nvidia-smi) and stop it before training here");
  }
  if (check.level == CheckLevel::kOk) found.push_back("no ECC errors, no pending remaps");
  check.detail = join(found, ", ");
  check.advice = join(advice, "; ");
  return check;
}

namespace {

// "0,2-4": NVML indices as ranges.
std::string index_ranges(const std::vector<int>& indices) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    parts.push_back(j == i ? cat(indices[i]) : cat(indices[i], "-", indices[j]));
    i = j + 1;
  }
  return join(parts, ",");
}

std::string joined_indices(const std::vector<int>& indices) {
  std::vector<std::string> parts;
  for (int index : indices) parts.push_back(cat(index));
  return join(parts, ",");
}

}  // namespace

CheckResult judge_visible_devices(const char* value, std::optional<int> physical) {
  const std::string name = "CUDA_VISIBLE_DEVICES";
  if (value == nullptr) {
    return {name, CheckLevel::kOk,
            physical ? cat("unset: CUDA sees every GPU (", *physical, ")") : "unset", ""};
  }
  std::string quoted = cat("\"", value, "\"");
  if (!physical) return {name, CheckLevel::kOk, quoted + " (no NVML to check it against)", ""};
  int visible = visible_gpu_count(*physical, value);
  size_t entries = std::string(value).empty() ? 0 : split(value, ',').size();
  if (visible == 0) {
    return {name, CheckLevel::kWarn, quoted + " hides every GPU",
            "unset it, or name the GPUs the workers should use"};
  }
  if (static_cast<size_t>(visible) < entries) {
    return {name, CheckLevel::kWarn,
            cat(quoted, ": CUDA stops at entry ", visible + 1,
                " (out of range or not a GPU), so only ", counted(visible, "GPU"), " visible"),
            cat("name only GPUs 0-", *physical - 1, " (or their UUIDs)")};
  }
  std::optional<std::vector<int>> indices = visible_gpu_indices(*physical, value);
  if (!indices)
    return {name, CheckLevel::kOk, cat(quoted, ": ", counted(visible, "GPU"), " by UUID"), ""};
  std::vector<int> hidden;
  for (int index = 0; index < *physical; ++index) {
    if (std::find(indices->begin(), indices->end(), index) == indices->end())
      hidden.push_back(index);
  }
  std::string detail = cat(quoted, ": names GPUs ", joined_indices(*indices), " of ", *physical);
  if (!hidden.empty()) detail += "; hides " + index_ranges(hidden);
  return {name, CheckLevel::kOk, detail, ""};
}

CheckResult judge_topology(const std::optional<MachineTopology>& topology,
                           const std::string& error) {
  if (!topology) {
    return {"topology", CheckLevel::kWarn, "hwloc could not read the topology: " + error,
            "--cpu-binding and --numa-binding need it; check lstopo"};
  }
  std::set<int> sockets, numa, cores;
  for (const TopologyPu& pu : topology->pus) {
    sockets.insert(pu.socket);
    numa.insert(pu.numa_node);
    cores.insert(pu.core);
  }
  std::string detail = join({counted(sockets.size(), "socket"), counted(numa.size(), "NUMA node"),
                             counted(cores.size(), "core"), counted(topology->pus.size(), "CPU")},
                            ", ");
  std::map<int, std::vector<int>> gpus_by_node;
  for (size_t i = 0; i < topology->gpus.size(); ++i)
    gpus_by_node[topology->gpus[i].numa_node].push_back(static_cast<int>(i));
  std::vector<std::string> placed;
  for (const auto& [node, gpus] : gpus_by_node) {
    if (node >= 0) placed.push_back(cat("GPU ", index_ranges(gpus), " on NUMA ", node));
  }
  if (!placed.empty()) detail += "; " + join(placed, ", ");
  if (!topology->this_machine) detail += " (HWLOC_XMLFILE/HWLOC_SYNTHETIC: not this machine)";
  auto unplaced = gpus_by_node.find(-1);
  if (unplaced != gpus_by_node.end()) {
    return {"topology", CheckLevel::kWarn,
            cat(detail, "; GPU ", index_ranges(unplaced->second), ": NUMA node not found"),
            "--numa-binding cannot place those GPUs: check that hwloc sees PCI devices "
            "(lstopo)"};
  }
  return {"topology", CheckLevel::kOk, detail, ""};
}

CheckResult judge_cgroups(bool contained, const std::string& own_cgroup, const std::string& why) {
  std::string where = own_cgroup.empty() ? "" : " under " + own_cgroup;
  if (contained) {
    return {"cgroup", CheckLevel::kOk,
            "cgroup v2: workers are contained in cgroups" + where + " (cgroup.kill ends a group)",
            ""};
  }
  std::string advice =
      why.find("COHORT_NO_CGROUP") != std::string::npos
          ? "unset COHORT_NO_CGROUP"
          : "run cohort as root or in a delegated cgroup (systemd-run --scope -p Delegate=yes, "
            "or Delegate=yes in its unit)";
  return {"cgroup", CheckLevel::kWarn,
          "no worker cgroups (" + why +
              "): cohort falls back to the subreaper, which misses a worker's daemonised "
              "descendants",
          advice};
}

CheckResult judge_torch(const TorchFinding& finding) {
  const std::string use = "or point PYTHON_EXEC at the workers' interpreter";
  if (finding.resolved.empty()) {
    std::string what = finding.python.find('/') == std::string::npos
                           ? finding.python + " not found on PATH"
                           : "PYTHON_EXEC " + finding.python + " not found";
    return {"torch", CheckLevel::kWarn, what,
            "install python3 with torch, " + use + " (cohort run --no-python needs neither)"};
  }
  if (finding.timed_out) {
    return {"torch", CheckLevel::kWarn, finding.resolved + " did not answer within 3 s",
            "check that it starts (" + finding.resolved + " -c pass)"};
  }
  std::string version(trim(finding.printed));
  if (version.empty()) {
    return {"torch", CheckLevel::kWarn, finding.resolved + " has no torch",
            "pip install torch there, " + use};
  }
  return {"torch", CheckLevel::kOk, "torch " + version + " in " + finding.resolved, ""};
}

CheckResult judge_tool(const std::string& name, const std::string& path, bool optional,
                       const std::string& use) {
  if (!path.empty()) return {name, CheckLevel::kOk, path + " (" + use + ")", ""};
  if (optional) return {name, CheckLevel::kOk, "not found (only " + use + ")", ""};
  return {name, CheckLevel::kWarn, "not found: no " + use,
          name == "eu-stack" ? "install elfutils" : "install " + name};
}

CheckResult judge_rendezvous(const std::string& endpoint, const StatusFetch& fetched,
                             bool token_given) {
  if (fetched.reply) {
    size_t runs = fetched.reply->runs.size();
    return {"rendezvous", CheckLevel::kOk,
            cat("cohort daemon at ", endpoint, " answers, ",
                token_given ? "token accepted" : "no token asked", ", ", runs, " run",
                runs == 1 ? "" : "s"),
            ""};
  }
  const std::string& problem = fetched.problem;
  std::string advice = "is cohortd running there, and reachable from here (firewall, address)?";
  if (problem.find("authentication failed") != std::string::npos) {
    advice =
        "give the daemon's token, or a run's with its --rdzv-id: --token-file or $COHORT_TOKEN";
  } else if (problem.find("no challenge from") != std::string::npos) {
    advice = "something else answers there: name cohortd's control port (29400 by default)";
  }
  return {"rendezvous", CheckLevel::kFail, problem, advice};
}

namespace {

// The command name of `pid` (/proc/PID/comm), or "".
std::string command_of(pid_t pid) {
  std::ifstream in(cat("/proc/", pid, "/comm"));
  std::string name;
  std::getline(in, name);
  return name;
}

void add_gpu_checks(std::vector<CheckResult>& checks) {
  std::optional<std::vector<GpuState>> gpus = nvml_gpu_states();
  checks.push_back(judge_nvml(gpus, nvml_driver_version()));
  std::vector<std::string> bus_ids;
  for (const GpuState& gpu : gpus.value_or(std::vector<GpuState>{})) {
    std::map<pid_t, std::string> names;
    for (pid_t pid : gpu.processes) {
      if (std::string name = command_of(pid); !name.empty()) names[pid] = name;
    }
    checks.push_back(judge_gpu(gpu, names));
    bus_ids.push_back(gpu.bus_id);
  }
  std::optional<int> physical;
  if (gpus) physical = static_cast<int>(gpus->size());
  checks.push_back(judge_visible_devices(std::getenv("CUDA_VISIBLE_DEVICES"), physical));
  std::string error;
  std::optional<MachineTopology> topology = load_machine_topology(bus_ids, error);
  checks.push_back(judge_topology(topology, error));
}

CheckResult cgroup_check() {
  std::string why;
  std::string own = own_cgroup_path(why);
  boost::asio::io_context io;
  std::unique_ptr<WorkerCgroups> cgroups = WorkerCgroups::create(io, why);
  bool contained = cgroups != nullptr;
  cgroups.reset();  // removes the per-agent directory it made
  return judge_cgroups(contained, own, why);
}

CheckResult fd_limit_check(const DoctorOptions& options) {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  auto value = [](rlim_t v) {
    return v == RLIM_INFINITY ? std::numeric_limits<long>::max() : static_cast<long>(v);
  };
  long nr_open = 0;
  std::ifstream("/proc/sys/fs/nr_open") >> nr_open;
  return judge_fd_limit(value(limit.rlim_cur), value(limit.rlim_max), options.expect_ranks,
                        options.expect_ranks_given, nr_open);
}

// Runs `python -c <probe>` with a deadline; what it printed.
TorchFinding probe_torch(const std::string& path_variable) {
  TorchFinding finding;
  const char* python_exec = std::getenv("PYTHON_EXEC");
  finding.python = python_exec != nullptr && *python_exec != '\0' ? python_exec : "python3";
  finding.resolved = find_executable(finding.python, path_variable);
  if (::access(finding.resolved.c_str(), X_OK) != 0) finding.resolved.clear();
  if (finding.resolved.empty()) return finding;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return finding;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, STDERR_FILENO);
    ::execl(finding.resolved.c_str(), finding.resolved.c_str(), "-c", torch_probe_code(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  auto deadline = std::chrono::steady_clock::now() + TorchProbe::kTimeout;
  char buffer[256];
  while (pid > 0) {
    if (wait_for_fd(fds[0], POLLIN, deadline) == FdWait::TimedOut) {
      finding.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    if (finding.printed.size() < 4096) finding.printed.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (pid > 0) ::waitpid(pid, nullptr, 0);
  if (finding.timed_out) finding.printed.clear();
  return finding;
}

std::vector<CheckResult> tool_checks(const std::string& path_variable) {
  return {judge_tool("eu-stack", find_executable("eu-stack", path_variable), false,
                     "native stacks of hung workers"),
          judge_tool("ssh", find_executable("ssh", path_variable), true, "for cohort launch"),
          judge_tool("srun", find_executable("srun", path_variable), true, "for Slurm")};
}

// The token for --rdzv-endpoint: --token-file, $COHORT_TOKEN, Slurm's job token.
TokenResult doctor_token(const DoctorOptions& options) {
  EnvMap env = parse_environ(environ);
  TokenResult token = load_token(options.token_file, env);
  if (token.token.empty() && token.error.empty()) token = slurm_job_token(env);
  return token;
}

// A flag's problem ("" when every flag is usable).
std::string flag_problem(const DoctorOptions& options) {
  if (options.expect_ranks < 1 || options.expect_ranks > 1000000)
    return "--expect-ranks: expected 1 to 1000000 ranks, got " + cat(options.expect_ranks);
  if (options.endpoint_given || !options.endpoint.empty()) {
    auto target = parse_host_port(options.endpoint, 29400);
    if (!target || target->port == 0)
      return "--rdzv-endpoint: expected host[:port] (port 1-65535), got \"" + options.endpoint +
             "\"";
  }
  if (!options.token_file.empty() && options.endpoint.empty())
    return "--token-file: only with --rdzv-endpoint (the token proven to that daemon)";
  if (!options.run_id.empty() && options.endpoint.empty())
    return "--rdzv-id: only with --rdzv-endpoint (the run whose token that daemon is shown)";
  if (std::string problem = options.run_id.empty() ? "" : run_id_problem(options.run_id);
      !problem.empty())
    return "--rdzv-id: " + problem;
  return "";
}

}  // namespace

int run_doctor_command(const DoctorOptions& options) {
  if (std::string problem = flag_problem(options); !problem.empty()) {
    std::cerr << "cohort doctor: " << problem << " (cohort doctor --help)\n";
    return kExitUsage;
  }
  TokenResult token;
  if (!options.endpoint.empty()) {
    token = doctor_token(options);
    if (!token.error.empty()) {
      std::cerr << "cohort doctor: " << token.error << "\n";
      return kExitUsage;
    }
  }
  const char* path = std::getenv("PATH");
  std::string path_variable = path != nullptr ? path : "";
  std::vector<CheckResult> checks;
  add_gpu_checks(checks);
  checks.push_back(cgroup_check());
  checks.push_back(fd_limit_check(options));
  checks.push_back(judge_torch(probe_torch(path_variable)));
  for (CheckResult& check : tool_checks(path_variable)) checks.push_back(std::move(check));
  if (!options.endpoint.empty()) {
    StatusQuery query;
    query.endpoint = options.endpoint;
    query.token = token.token;
    query.run_id = options.run_id;
    query.timeout_ms = options.timeout_ms;
    checks.push_back(judge_rendezvous(options.endpoint, fetch_status(query), !token.token.empty()));
  }
  if (options.json) {
    std::cout << checks_json(checks) << "\n";
  } else {
    for (const CheckResult& check : checks) std::cout << format_check_line(check) << "\n";
  }
  return doctor_exit_code(checks);
}

}  // namespace cohort
