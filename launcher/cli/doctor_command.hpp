// `cohort doctor`: the check a cluster admin runs before trusting a node (like ompi_info or
// dcgmi diag). One line per check (ok, warn or FAIL, what it found and what to do): NVML and each
// GPU, CUDA_VISIBLE_DEVICES, worker cgroups, the hwloc topology, RLIMIT_NOFILE, Python's torch,
// eu-stack, ssh, srun, and a rendezvous daemon if named. The judging and formatting are pure
// functions; run_doctor_command probes the machine. Blocking; main thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/nvml.hpp"
#include "launcher/cli/status_command.hpp"
#include "launcher/options/cli_fwd.hpp"
#include "launcher/topology/machine_topology.hpp"

namespace cohort {

enum class CheckLevel { kOk, kWarn, kFail };

/// One check's result: `advice` says what to do when it is not ok.
struct CheckResult {
  std::string name;
  CheckLevel level = CheckLevel::kOk;
  std::string detail;
  std::string advice;
};

struct DoctorOptions {
  std::string endpoint;  ///< --rdzv-endpoint; empty: no rendezvous check
  std::string token_file;
  std::string run_id;  ///< --rdzv-id: the run a run's token is proven for; empty: the daemon's
  int expect_ranks = 1024;
  bool expect_ranks_given = false;  ///< set by the caller: --expect-ranks was on the command line
  bool endpoint_given = false;      ///< set by the caller: --rdzv-endpoint was (even empty)
  bool json = false;
  int timeout_ms = 5000;
};

void add_doctor_flags(CLI::App& app, DoctorOptions& options);
/// Probes this machine, prints the checks; 0 when none FAILed, 1 otherwise (2: a bad flag).
int run_doctor_command(const DoctorOptions& options);

// The pure parts.

/// "ok", "warn" or "FAIL".
std::string level_word(CheckLevel level);
/// "FAIL  gpu 1                 3 uncorrectable ECC errors; to fix: ..." (no newline).
std::string format_check_line(const CheckResult& check);
/// {"checks": [{"name", "level", "detail", "advice"}...], "ok": N, "warn": N, "fail": N}.
std::string checks_json(const std::vector<CheckResult>& checks);
/// 0 when no check FAILed, 1 otherwise.
int doctor_exit_code(const std::vector<CheckResult>& checks);

/// Descriptors a daemon needs for `ranks` workers: one per worker's store connection and one per
/// agent (at most one per rank), plus a margin for its listeners, logs and HTTP clients.
long descriptors_for_ranks(long ranks);
/// RLIMIT_NOFILE's soft and hard limits against that need; cohortd raises its soft limit to the
/// hard one, so only the hard limit can fall short (FAIL when `ranks_given`, else warn). No hard
/// limit may pass the kernel's fs.nr_open (`nr_open`, 0 when unknown): past it, the advice
/// starts there.
CheckResult judge_fd_limit(long soft, long hard, long ranks, bool ranks_given, long nr_open = 0);

/// The NVML line: the driver and the GPU count, or warn without NVML.
CheckResult judge_nvml(const std::optional<std::vector<GpuState>>& gpus,
                       const std::optional<std::string>& driver);
/// One GPU: FAIL on uncorrectable ECC errors or a pending remap, warn when processes hold it or
/// ECC is off. `names`: each holding pid's command name, where known.
CheckResult judge_gpu(const GpuState& gpu, const std::map<pid_t, std::string>& names);
/// CUDA_VISIBLE_DEVICES (`value` null: unset) against the `physical` GPUs NVML sees.
CheckResult judge_visible_devices(const char* value, std::optional<int> physical);
/// The topology's sockets, NUMA nodes, cores, CPUs and each GPU's NUMA node; warn without one.
CheckResult judge_topology(const std::optional<MachineTopology>& topology,
                           const std::string& error);
/// Whether workers can be contained in cgroups (`why` not: WorkerCgroups::create's reason).
CheckResult judge_cgroups(bool contained, const std::string& own_cgroup, const std::string& why);

/// What probing the workers' Python for torch found.
struct TorchFinding {
  std::string python;    ///< as asked: $PYTHON_EXEC or "python3"
  std::string resolved;  ///< its path on PATH; empty: not found
  bool timed_out = false;
  std::string printed;  ///< the probe's output: torch's version, or nothing without torch
};
CheckResult judge_torch(const TorchFinding& finding);
/// A tool looked up on PATH (`path` empty: not found). eu-stack missing is a warning; ssh and srun
/// are optional (`optional`: ok either way, `use` says what for).
CheckResult judge_tool(const std::string& name, const std::string& path, bool optional,
                       const std::string& use);
/// The daemon at `endpoint`: ok when it answered a status request (proving `token_given`'s token).
CheckResult judge_rendezvous(const std::string& endpoint, const StatusFetch& fetched,
                             bool token_given);

}  // namespace cohort
