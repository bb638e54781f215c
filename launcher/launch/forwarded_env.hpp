// The environment `cohort launch` sends to every host: the variables users expect to travel
// (NCCL_*, GLOO_*, CUDA_* but CUDA_VISIBLE_DEVICES, PYTHON*, TORCH_*, OMP_*, MKL_*, UCX_*, FI_*,
// HF_*), then an env file (.cohort_env: NAME=value lines, quotes and "# comments" read as a
// shell reads them, nothing expanded), then -x NAME / -x NAME=value (and --secret's), each
// later source winning. Pure; any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace cohort {

using EnvVars = std::map<std::string, std::string>;

struct ForwardedEnv {
  EnvVars vars;
  std::vector<std::string> problems;  ///< each names "-x" or "FILE:LINE"
};

/// Whether `name` travels without being asked for.
bool forwarded_by_default(const std::string& name);

/// `local` is the launching environment; `env_file` the env file's text (empty: none) named
/// `env_file_origin` in problems; `exports` the -x values in order, then `secrets` --secret's
/// (read as -x's, and winning over them).
ForwardedEnv forwarded_env(const EnvVars& local, const std::string& env_file,
                           const std::string& env_file_origin,
                           const std::vector<std::string>& exports,
                           const std::vector<std::string>& secrets = {});

}  // namespace cohort
