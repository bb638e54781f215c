// What validating `cohort run`'s flags reads from the machine: the environment variables, the
// host name, the CPU count, the GPU count, executables (PATH lookup) and whether a host name is
// this machine. run_command builds the real one once at start (machine_run_environment); tests
// and cohort launch build their own, so validation stays pure. Main thread, at start.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "agent/worker_env.hpp"
#include "launcher/topology/machine_topology.hpp"

namespace cohort {

struct RunEnvironment {
  EnvMap env;  ///< the agent's environment variables
  std::string host_name;
  int cpu_count = 1;
  /// Physical GPUs (NVML's count; 0 without NVML), asked only when --nproc-per-node needs it.
  std::function<int()> gpu_count = [] { return 0; };
  /// The path of an executable file: `name` as given when it has a '/', else found in PATH.
  /// Empty when there is none.
  std::function<std::string(const std::string& name)> find_executable = [](const std::string&) {
    return std::string();
  };
  /// The CPU and GPU topology (hwloc and NVML), asked only when a binding is wanted; nullopt
  /// with `error` when it cannot be read.
  std::function<std::optional<MachineTopology>(std::string& error)> topology =
      [](std::string& error) -> std::optional<MachineTopology> {
    error = "no topology";
    return std::nullopt;
  };
  /// Whether `path` names something here (a file, or a directory python can run); relative
  /// paths from the current directory, where the workers start.
  std::function<bool(const std::string& path)> path_exists = [](const std::string&) {
    return true;
  };
  /// Whether `host` names this machine (loopback, or an address it can bind).
  std::function<bool(const std::string& host)> is_local_host = [](const std::string&) {
    return false;
  };

  /// The variable's value; nullopt when it is unset.
  std::optional<std::string> var(const std::string& name) const;
};

/// The machine this process runs on, with the environment `environ_block` (usually `environ`).
RunEnvironment machine_run_environment(char** environ_block);

}  // namespace cohort
