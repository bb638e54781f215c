#include "launcher/options/foreign_flags.hpp"

#include <map>

namespace cohort {
namespace {

const char* const kPlacement =
    "cohort places one worker per slot, host by host; CPU and memory binding are --numa-binding "
    "and --cpu-bind";

// Each tool's flag, in the spellings users type, and what to give cohort instead.
const std::map<std::string, std::string>& hints() {
  static const std::map<std::string, std::string> table = {
      {"--num_gpus", "DeepSpeed's; here --nproc-per-node"},
      {"--num-gpus", "DeepSpeed's; here --nproc-per-node"},
      {"--num_nodes",
       "DeepSpeed's; cohort launch runs on the hosts of -H, --hostfile or --include"},
      {"--num-nodes",
       "DeepSpeed's; cohort launch runs on the hosts of -H, --hostfile or --include"},
      {"--bind_cores_to_rank", "DeepSpeed's; here --numa-binding or --cpu-bind"},
      {"--map-by", std::string("Open MPI's; ") + kPlacement},
      {"-map-by", std::string("Open MPI's; ") + kPlacement},
      {"--bind-to", std::string("Open MPI's; ") + kPlacement},
      {"-bind-to", std::string("Open MPI's; ") + kPlacement},
      {"--rank-by", std::string("Open MPI's; ") + kPlacement},
      {"--mca", "Open MPI's; NCCL and Gloo read NCCL_* and GLOO_* variables: -x NAME=value"},
      {"-mca", "Open MPI's; NCCL and Gloo read NCCL_* and GLOO_* variables: -x NAME=value"},
      {"--oversubscribe", "Open MPI's; -N starts that many workers per host, whatever the slots"},
      {"-oversubscribe", "Open MPI's; -N starts that many workers per host, whatever the slots"},
      {"--tag-output", "mpirun's; every worker line already starts with [host:rank]:"},
      {"-tag-output", "mpirun's; every worker line already starts with [host:rank]:"},
      {"--timestamp-output", "mpirun's; --event-log records the time of every event"},
      {"-timestamp-output", "mpirun's; --event-log records the time of every event"},
      {"-genv", "mpiexec's; here -x NAME=value"},
      {"-env", "mpiexec's; here -x NAME=value"},
      {"-genvlist", "mpiexec's; here -x NAME for each"},
      {"-genvall", "mpiexec's; NCCL_*, CUDA_*, PYTHON* ... go to every host already, -x NAME adds"},
      {"--wdir", "mpirun's; every host runs in the launch's own directory"},
      {"-wdir", "mpiexec's; every host runs in the launch's own directory"},
      {"-wd", "mpirun's; every host runs in the launch's own directory"},
      {"--prefix", "mpirun's; here --remote-cohort PATH"},
      {"--ntasks", "srun's; cohort launch's -n, the workers in all"},
      {"--ntasks-per-node", "srun's; here --nproc-per-node"},
  };
  return table;
}

}  // namespace

std::string foreign_flag_hint(const std::string& flag) {
  auto found = hints().find(flag);
  return found == hints().end() ? "" : found->second;
}

std::vector<std::string> foreign_flag_names() {
  std::vector<std::string> names;
  for (const auto& [name, hint] : hints()) names.push_back(name);
  return names;
}

}  // namespace cohort
