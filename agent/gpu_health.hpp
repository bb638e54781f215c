// The built-in GPU checks of the health gate, run before the node joins each round when the node
// has GPUs: NVML still answers and sees every GPU the node started with; no GPU is still held by
// a process of the previous round once --gpu-reclaim-timeout has passed (the driver frees a dead
// worker's memory asynchronously, so the check polls until then); no uncorrectable ECC error and
// no row remap or page retirement is pending. Owned by the Agent; io thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "common/nvml.hpp"

namespace cohort {

struct GpuHealthSettings {
  std::vector<int> indices;  ///< NVML indices of the node's visible GPUs; empty: no GPU checks
  std::chrono::milliseconds reclaim_timeout{30000};  ///< --gpu-reclaim-timeout
  bool enabled() const { return !indices.empty(); }
};

/// Says whether a process holding a GPU belongs to the previous round.
using PreviousRoundTest = std::function<bool(pid_t)>;

/// The previous round's processes still holding one of the node's GPUs, one "GPU 1 (0000:0b:00.0)
/// held by pid 4242" each.
std::vector<std::string> gpus_still_held(const std::vector<GpuState>& gpus,
                                         const std::vector<int>& indices,
                                         const PreviousRoundTest& of_previous_round);

/// Why the node's GPUs are unhealthy ("" when they are well); `gpus` is NVML's reading, nullopt
/// when NVML no longer answers.
std::string gpu_problem(const std::optional<std::vector<GpuState>>& gpus,
                        const GpuHealthSettings& settings,
                        const PreviousRoundTest& of_previous_round);

class GpuHealthCheck {
 public:
  using Done = std::function<void(const std::string& problem)>;
  using Reader = std::function<std::optional<std::vector<GpuState>>()>;

  GpuHealthCheck(Clock& clock, GpuHealthSettings settings, Reader read_gpus = nvml_gpu_states);

  /// Checks the GPUs; `done` gets the problem ("" healthy), at once unless a process of
  /// `previous_round` (worker pids, or members of their process groups) still holds a GPU, then
  /// once it lets go or the reclaim timeout has passed. One at a time: a call while one waits
  /// only replaces the callback.
  void run(std::vector<pid_t> previous_round, Done done);
  bool running() const { return static_cast<bool>(done_); }

 private:
  void poll();
  bool of_previous_round(pid_t pid) const;

  Clock& clock_;
  GpuHealthSettings settings_;
  Reader read_gpus_;
  std::unique_ptr<Timer> poll_timer_;
  std::vector<pid_t> previous_round_;
  SteadyTime reclaim_deadline_{};
  Done done_;
};

}  // namespace cohort
