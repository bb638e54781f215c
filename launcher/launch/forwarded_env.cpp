#include "launcher/launch/forwarded_env.hpp"

#include "common/text.hpp"

namespace cohort {
namespace {

// "NAME=value" lines; '#' starts a comment line; an optional "export " in front is allowed; a
// value in matching single or double quotes loses them.
void read_env_file(const std::string& text, const std::string& origin, ForwardedEnv& env) {
  int line_number = 0;
  for (const std::string& raw : split(text, '\n')) {
    ++line_number;
    std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    if (line.rfind("export ", 0) == 0) line = trim(line.substr(7));
    size_t equals = line.find('=');
    std::string_view name = line.substr(0, equals);
    if (equals == std::string_view::npos || !is_variable_name(name)) {
      env.problems.push_back(
          cat(origin, ":", line_number, ": expected NAME=value, got '", std::string(line), "'"));
      continue;
    }
    std::string_view value = line.substr(equals + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    env.vars[std::string(name)] = std::string(value);
  }
}

void apply_exports(const EnvVars& local, const std::vector<std::string>& exports,
                   ForwardedEnv& env) {
  for (const std::string& item : exports) {
    size_t equals = item.find('=');
    std::string name = item.substr(0, equals);
    if (!is_variable_name(name)) {
      env.problems.push_back(cat("-x: expected NAME or NAME=value, got '", item, "'"));
      continue;
    }
    if (equals != std::string::npos) {
      env.vars[name] = item.substr(equals + 1);
      continue;
    }
    auto found = local.find(name);
    if (found == local.end()) {
      env.problems.push_back(cat("-x ", name, ": not set here (use -x ", name, "=value)"));
      continue;
    }
    env.vars[name] = found->second;
  }
}

}  // namespace

bool forwarded_by_default(const std::string& name) {
  if (name == "CUDA_VISIBLE_DEVICES") return false;  // the launching host's GPUs, not theirs
  for (const char* prefix :
       {"NCCL_", "GLOO_", "CUDA_", "PYTHON", "TORCH_", "OMP_", "MKL_", "UCX_", "FI_", "HF_"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

ForwardedEnv forwarded_env(const EnvVars& local, const std::string& env_file,
                           const std::string& env_file_origin,
                           const std::vector<std::string>& exports) {
  ForwardedEnv env;
  for (const auto& [name, value] : local) {
    if (forwarded_by_default(name)) env.vars[name] = value;
  }
  read_env_file(env_file, env_file_origin, env);
  apply_exports(local, exports, env);
  return env;
}

}  // namespace cohort
