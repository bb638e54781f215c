// What the health gate runs before a node joins a round: the node's own --health-check command
// (agent/health_check.hpp) and the built-in GPU checks (agent/gpu_health.hpp). Plain settings,
// filled in by the launcher from the flags and read by the checks; no thread of their own.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace cohort {

struct HealthSettings {
  std::string command;  ///< empty: no health check
  std::chrono::milliseconds timeout{60000};
  std::chrono::milliseconds interval{10000};  ///< between checks while unhealthy
  bool enabled() const { return !command.empty(); }
};

struct GpuHealthSettings {
  /// The node's GPUs (NVML indices) out of the `physical` ones NVML sees: those
  /// CUDA_VISIBLE_DEVICES leaves. Unset: no GPU checks.
  std::function<std::vector<int>(int physical)> visible;
  std::chrono::milliseconds reclaim_timeout{30000};  ///< --gpu-reclaim-timeout
  /// How long NVML may take to answer a reading (--health-check-timeout): a driver stuck on a
  /// failed GPU may never answer.
  std::chrono::milliseconds answer_timeout{60000};
  bool enabled() const { return static_cast<bool>(visible); }
};

}  // namespace cohort
