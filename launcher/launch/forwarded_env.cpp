#include "launcher/launch/forwarded_env.hpp"

#include "common/text.hpp"

namespace cohort {
namespace {

// The value after "NAME=", as a shell would read a plain or quoted word: matching quotes are
// dropped, a '#' after a space (or after the closing quote) starts a comment. Nothing inside is
// expanded or unescaped. Returns a problem, or empty with `value` set.
std::string env_file_value(std::string_view text, std::string& value) {
  if (!text.empty() && (text.front() == '"' || text.front() == '\'')) {
    size_t close = text.find(text.front(), 1);
    if (close == std::string_view::npos) return cat("no closing ", text.front());
    std::string_view rest = trim(text.substr(close + 1));
    if (!rest.empty() && rest.front() != '#')
      return cat("'", std::string(rest), "' after the closing ", text.front());
    value = std::string(text.substr(1, close - 1));
    return {};
  }
  size_t comment = text.find('#');
  while (comment != std::string_view::npos && comment > 0 && text[comment - 1] != ' ' &&
         text[comment - 1] != '\t') {
    comment = text.find('#', comment + 1);  // "a#b" is a value, as in a shell
  }
  value = std::string(trim(text.substr(0, comment)));
  return {};
}

// "NAME=value" lines; '#' starts a comment; an optional "export" in front is allowed.
void read_env_file(const std::string& text, const std::string& origin, ForwardedEnv& env) {
  int line_number = 0;
  for (const std::string& raw : split(text, '\n')) {
    ++line_number;
    std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    if (line.rfind("export", 0) == 0 && line.size() > 6 && (line[6] == ' ' || line[6] == '\t'))
      line = trim(line.substr(7));
    size_t equals = line.find('=');
    std::string_view name = line.substr(0, equals);
    std::string where = cat(origin, ":", line_number, ": ");
    if (equals == std::string_view::npos || !is_variable_name(name)) {
      env.problems.push_back(cat(where, "expected NAME=value, got '", std::string(line), "'"));
      continue;
    }
    std::string value;
    if (std::string problem = env_file_value(line.substr(equals + 1), value); !problem.empty()) {
      env.problems.push_back(cat(where, std::string(name), ": ", problem));
      continue;
    }
    env.vars[std::string(name)] = value;
  }
}

// -x's (or --secret's, named by `flag`) NAME or NAME=value, in order.
void apply_exports(const EnvVars& local, const std::vector<std::string>& exports,
                   const std::string& flag, ForwardedEnv& env) {
  for (const std::string& item : exports) {
    size_t equals = item.find('=');
    std::string name = item.substr(0, equals);
    if (!is_variable_name(name)) {
      env.problems.push_back(cat(flag, ": expected NAME or NAME=value, got '", item, "'"));
      continue;
    }
    if (equals != std::string::npos) {
      env.vars[name] = item.substr(equals + 1);
      continue;
    }
    auto found = local.find(name);
    if (found == local.end()) {
      env.problems.push_back(
          cat(flag, " ", name, ": not set here (use ", flag, " ", name, "=value)"));
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
                           const std::vector<std::string>& exports,
                           const std::vector<std::string>& secrets) {
  ForwardedEnv env;
  for (const auto& [name, value] : local) {
    if (forwarded_by_default(name)) env.vars[name] = value;
  }
  read_env_file(env_file, env_file_origin, env);
  apply_exports(local, exports, "-x", env);
  apply_exports(local, secrets, "--secret", env);
  return env;
}

}  // namespace cohort
