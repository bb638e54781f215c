#include "launcher/slurm/slurm_env.hpp"

#include "common/text.hpp"
#include "launcher/slurm/hostlist.hpp"
#include "launcher/topology/visible_gpus.hpp"

namespace cohort {
namespace {

std::optional<std::pair<std::string, std::string>> first_of(
    const std::map<std::string, std::string>& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto found = env.find(name);
    if (found != env.end() && !found->second.empty()) return std::make_pair(name, found->second);
  }
  return std::nullopt;
}

SlurmValue sourced(const std::string& value, const std::pair<std::string, std::string>& from) {
  return {value, from.first + "=" + from.second, from.first};
}

// The node list's second and third hosts at `port`, when it has three or more (the rest of a
// list of any size is never made).
std::optional<SlurmValue> fallback_hosts(const std::string& list, int port,
                                         const std::pair<std::string, std::string>& from) {
  auto hosts = first_hosts(list, 3);
  if (!hosts || hosts->size() < 3) return std::nullopt;
  return sourced(cat((*hosts)[1], ":", port, ",", (*hosts)[2], ":", port), from);
}

// splitmix64's finalizer: job ids that differ in any bit (1042, 2042, 1043) land far apart.
uint64_t mixed(uint64_t value) {
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

// A step id as a number: Slurm's are; any other text is hashed (FNV-1a), never refused.
uint64_t step_number(const std::string& text) {
  if (auto number = parse_int(text); number && *number >= 0) return static_cast<uint64_t>(*number);
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

}  // namespace

int slurm_rendezvous_port(uint64_t job_id, uint64_t step_id) {
  constexpr uint64_t kPorts = kSlurmLastPort - kSlurmFirstPort + 1;
  return kSlurmFirstPort + static_cast<int>((mixed(job_id) % kPorts + step_id % kPorts) % kPorts);
}

std::optional<SlurmDefaults> slurm_defaults(const std::map<std::string, std::string>& env,
                                            int given_port) {
  auto job = first_of(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  auto step = first_of(env, {"SLURM_STEP_ID", "SLURM_STEPID"});
  if (!job || !step) return std::nullopt;
  SlurmDefaults defaults;
  if (auto nodes = first_of(env, {"SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"})) {
    defaults.nnodes = sourced(nodes->second, *nodes);
  }
  defaults.rdzv_id =
      SlurmValue{"slurm-" + job->second + "." + step->second,
                 job->first + "=" + job->second + ", " + step->first + "=" + step->second,
                 job->first + " and " + step->first};
  if (auto list = first_of(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})) {
    auto host = first_host(list->second);
    auto job_number = parse_int(job->second);
    if (!host || !job_number) {
      defaults.problems.push_back(
          cat(list->first, "='", list->second, "' is not a Slurm hostlist cohort can read"));
    } else {
      int port = given_port > 0 ? given_port
                                : slurm_rendezvous_port(static_cast<uint64_t>(*job_number),
                                                        step_number(step->second));
      defaults.rdzv_endpoint = sourced(cat(*host, ":", port), *list);
      defaults.rdzv_fallback = fallback_hosts(list->second, port, *list);
    }
  }
  if (auto node = first_of(env, {"SLURM_NODEID"}))
    defaults.node_rank = sourced(node->second, *node);
  if (auto gpus = first_of(env, {"SLURM_GPUS_ON_NODE"}); gpus && parse_int(gpus->second) > 0) {
    defaults.nproc_per_node = sourced(gpus->second, *gpus);
  } else if (auto visible = first_of(env, {"CUDA_VISIBLE_DEVICES"})) {
    int count = visible_gpu_count(1 << 20, visible->second.c_str());
    if (count > 0) defaults.nproc_per_node = sourced(std::to_string(count), *visible);
  }
  return defaults;
}

}  // namespace cohort
