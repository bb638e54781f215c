#include "agent/worker_env.hpp"

#include "common/text.hpp"

namespace cohort {
namespace {

std::string inherited_or(const EnvMap& env, const std::string& name, const std::string& fallback) {
  auto found = env.find(name);
  return found == env.end() ? fallback : found->second;
}

}  // namespace

EnvMap parse_environ(char** environ_block) {
  EnvMap env;
  for (char** entry = environ_block; entry != nullptr && *entry != nullptr; ++entry) {
    std::string text(*entry);
    size_t equals = text.find('=');
    if (equals == std::string::npos) continue;
    env.emplace(text.substr(0, equals), text.substr(equals + 1));
  }
  return env;
}

std::string virtual_visible_device(const EnvMap& agent_env, int local_rank) {
  auto visible = agent_env.find("CUDA_VISIBLE_DEVICES");
  if (visible == agent_env.end()) return std::to_string(local_rank);
  auto devices = split(visible->second, ',');
  if (local_rank >= static_cast<int>(devices.size())) return {};
  return std::string(trim(devices[static_cast<size_t>(local_rank)]));
}

EnvMap async_error_handling(std::optional<int> torch_major, const EnvMap& agent_env) {
  EnvMap vars{{"TORCH_NCCL_ASYNC_ERROR_HANDLING",
               inherited_or(agent_env, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")}};
  const char* old_name = "NCCL_ASYNC_ERROR_HANDLING";
  if (agent_env.count(old_name) != 0)
    vars[old_name] = agent_env.at(old_name);
  else if (!torch_major || *torch_major < 2)
    vars[old_name] = "1";
  return vars;
}

EnvMap worker_variables(const WorkerEnvSettings& settings, const RoundInfo& round, int local_rank,
                        const std::string& error_file, const EnvMap& agent_env) {
  const int rank = round.base_rank + local_rank;
  EnvMap vars{
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"RANK", std::to_string(rank)},
      {"GROUP_RANK", std::to_string(round.group_rank)},
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_NAME", settings.role},
      {"LOCAL_WORLD_SIZE", std::to_string(settings.local_world_size)},
      {"WORLD_SIZE", std::to_string(round.world_size)},
      {"GROUP_WORLD_SIZE", std::to_string(round.group_world_size)},
      {"ROLE_WORLD_SIZE", std::to_string(round.world_size)},
      {"MASTER_ADDR", round.master_addr},
      {"MASTER_PORT", std::to_string(round.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(round.round)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(settings.max_restarts)},
      {"TORCHELASTIC_RUN_ID", settings.run_id},
      {"TORCHELASTIC_USE_AGENT_STORE", round.use_agent_store ? "True" : "False"},
      {"TORCHELASTIC_ERROR_FILE", error_file},
      {"TORCHELASTIC_SIGNALS_TO_HANDLE", settings.signals_to_handle},
  };
  vars.merge(async_error_handling(settings.torch_major, agent_env));
  if (settings.local_world_size > 1 && agent_env.count("OMP_NUM_THREADS") == 0) {
    vars["OMP_NUM_THREADS"] = "1";
  }
  if (settings.virtual_local_rank) {
    vars["LOCAL_RANK"] = "0";
    vars["CUDA_VISIBLE_DEVICES"] = virtual_visible_device(agent_env, local_rank);
  }
  return vars;
}

namespace {

// The names under which the flight recorder's dump stem goes (hang_variables).
std::vector<const char*> dump_stem_names(const WorkerEnvSettings& settings, const EnvMap& user) {
  const char* newer = "TORCH_FR_DUMP_TEMP_FILE";
  const char* older = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE";
  std::vector<const char*> set_by_user;
  for (const char* name : {newer, older}) {
    if (user.count(name) != 0) set_by_user.push_back(name);
  }
  if (!set_by_user.empty()) return set_by_user;
  if (!settings.torch_major || (*settings.torch_major == 2 && !settings.torch_minor)) {
    return {newer, older};
  }
  bool reads_newer =
      *settings.torch_major > 2 || (*settings.torch_major == 2 && *settings.torch_minor >= 9);
  return {reads_newer ? newer : older};
}

}  // namespace

EnvMap hang_variables(const std::string& attempt_dir, const EnvMap& agent_env,
                      const WorkerEnvSettings& settings) {
  EnvMap vars{
      {"PYTHONFAULTHANDLER", inherited_or(agent_env, "PYTHONFAULTHANDLER", "1")},
      {"TORCH_NCCL_DUMP_ON_TIMEOUT", inherited_or(agent_env, "TORCH_NCCL_DUMP_ON_TIMEOUT", "1")},
      {"TORCH_NCCL_TRACE_BUFFER_SIZE",
       inherited_or(agent_env, "TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")}};
  if (!attempt_dir.empty()) {
    std::string dumps = attempt_dir + "/nccl_trace_rank_";
    for (const char* name : dump_stem_names(settings, agent_env)) {
      vars[name] = inherited_or(agent_env, name, dumps);
    }
    vars["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] = inherited_or(
        agent_env, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", attempt_dir + "/nccl_pipe_rank_");
  }
  return vars;
}

std::string python_path_with(const std::string& python_dir, const EnvMap& agent_env) {
  std::string inherited = inherited_or(agent_env, "PYTHONPATH", "");
  return inherited.empty() ? python_dir : inherited + ":" + python_dir;
}

std::string nccl_dump_pipe(const EnvMap& vars, int rank) {
  auto stem = vars.find("TORCH_NCCL_DEBUG_INFO_PIPE_FILE");
  if (stem == vars.end() || stem->second.empty()) return {};
  return stem->second + std::to_string(rank) + ".pipe";
}

std::string nccl_dump_file(const EnvMap& vars, int rank) {
  for (const char* name : {"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}) {
    auto stem = vars.find(name);
    if (stem != vars.end() && !stem->second.empty()) return stem->second + std::to_string(rank);
  }
  return "/tmp/nccl_trace_rank_" + std::to_string(rank);
}

std::vector<std::string> merge_env(const EnvMap& agent_env, const EnvMap& variables) {
  EnvMap merged = agent_env;
  for (const auto& [name, value] : variables) merged[name] = value;
  std::vector<std::string> entries;
  entries.reserve(merged.size());
  for (const auto& [name, value] : merged) entries.push_back(name + "=" + value);
  return entries;
}

}  // namespace cohort
