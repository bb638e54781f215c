#include "launcher/launch/srun_command.hpp"

#include <climits>

#include "common/text.hpp"

namespace cohort {
namespace {

// "[type:]N" with N a count of at least 1.
std::optional<TaskGpus> typed_count(const std::string& text, const std::string& variable) {
  size_t colon = text.rfind(':');
  std::string type = colon == std::string::npos ? "" : text.substr(0, colon);
  auto count = parse_int(colon == std::string::npos ? text : text.substr(colon + 1));
  if (!count || *count < 1 || *count > INT_MAX / 4096 || type.find(':') != std::string::npos)
    return std::nullopt;
  return TaskGpus{type, static_cast<int>(*count), variable};
}

// The gpu entry of a TRES list, "gres/gpu:2" (or "gres/gpu=2", "gres:gpu:2", "gpu:2").
std::optional<TaskGpus> tres_gpus(const std::string& list) {
  std::optional<TaskGpus> found;
  for (std::string item : split(list, ',')) {
    for (const char* prefix : {"gres/", "gres:"}) {
      if (item.rfind(prefix, 0) == 0) item.erase(0, 5);
    }
    if (item.rfind("gpu", 0) != 0 || item.size() < 5 || (item[3] != ':' && item[3] != '='))
      continue;
    if (found) return std::nullopt;  // several kinds: left to the user's --launcher-args
    found = typed_count(item.substr(4), "SLURM_TRES_PER_TASK");
    if (!found) return std::nullopt;
  }
  return found;
}

}  // namespace

std::optional<TaskGpus> job_gpus_per_task(const std::map<std::string, std::string>& env) {
  auto per_task = env.find("SLURM_GPUS_PER_TASK");
  if (per_task != env.end() && !per_task->second.empty())
    return typed_count(per_task->second, "SLURM_GPUS_PER_TASK");
  auto tres = env.find("SLURM_TRES_PER_TASK");
  if (tres != env.end()) return tres_gpus(tres->second);
  return std::nullopt;
}

// --overlap: the pre-check's steps and the run's may meet on a node, and the batch script's own
// step holds nothing back. --mpi=none: no PMI set-up for a process that is not MPI.
// --cpu-bind=none: the task gets every CPU of the job on its node, not the first one. Explicit
// task counts win over the job's SLURM_NTASKS* that srun would read from the environment. In a
// job with GPUs per task, the step of one task would inherit one task's GPUs (srun reads
// SLURM_GPUS_PER_TASK): --gres asks for the GPUs of all the host's slots on the node instead
// (Slurm 22.05 refuses a step's --gpus-per-task above the job's: "Invalid generic resource").
std::vector<std::string> srun_argv(const SrunSettings& srun, const std::string& host, int slots,
                                   const std::string& remote_line) {
  std::vector<std::string> argv{srun.program,          "--nodes=1",          "--ntasks=1",
                                "--ntasks-per-node=1", "--nodelist=" + host, "--overlap",
                                "--mpi=none",          "--cpu-bind=none",    "--quiet"};
  if (const auto& gpus = srun.gpus_per_task) {
    std::string type = gpus->type.empty() ? "" : gpus->type + ":";
    argv.push_back(cat("--gres=gpu:", type, int64_t{gpus->count} * slots));
  }
  argv.insert(argv.end(), srun.extra_args.begin(), srun.extra_args.end());
  argv.insert(argv.end(), {"/bin/sh", "-c", remote_line});
  return argv;
}

}  // namespace cohort
