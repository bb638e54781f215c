// The built-in GPU checks of the health gate, run before the node joins each round when the node
// has GPUs: NVML still answers and sees every GPU the node started with; no GPU is still held by
// a process of the previous round once --gpu-reclaim-timeout has passed (the driver frees a dead
// worker's memory asynchronously, so the check polls until then, and only then); no uncorrectable
// ECC error and no row remap or page retirement is pending. NVML is read on a thread of the
// check's own, never on the agent's: the first reading starts ahead of the first round (it loads
// NVML, the slow part, while the agent connects). A reading NVML has not answered within its
// timeout makes the node unhealthy, and a thread still inside a hung driver is left behind, not
// waited for, when the check ends. Owned by the Agent; io thread.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/health_settings.hpp"
#include "common/clock.hpp"
#include "common/nvml.hpp"

namespace cohort {

/// Says whether a process holding a GPU belongs to the previous round.
using PreviousRoundTest = std::function<bool(pid_t)>;

/// NVML's reading of every GPU; nullopt when NVML does not answer.
using GpuReading = std::optional<std::vector<GpuState>>;

/// The previous round's processes still holding one of the node's GPUs, one "GPU 1 (0000:0b:00.0)
/// held by pid 4242" each.
std::vector<std::string> gpus_still_held(const std::vector<GpuState>& gpus,
                                         const std::vector<int>& indices,
                                         const PreviousRoundTest& of_previous_round);

/// Why the node's GPUs (`indices`) are unhealthy ("" when they are well).
std::string gpu_problem(const GpuReading& gpus, const std::vector<int>& indices,
                        std::chrono::milliseconds reclaim_timeout,
                        const PreviousRoundTest& of_previous_round);

class GpuHealthCheck {
 public:
  using Done = std::function<void(const std::string& problem)>;
  using Reader = std::function<GpuReading()>;

  /// Reads with `read` on the caller's thread, when asked (tests).
  GpuHealthCheck(Clock& clock, GpuHealthSettings settings, Reader read);
  /// Reads NVML on a thread of its own and hands the reading to `io`'s thread.
  GpuHealthCheck(boost::asio::io_context& io, Clock& clock, GpuHealthSettings settings,
                 Reader read = nvml_gpu_health);
  ~GpuHealthCheck();
  GpuHealthCheck(const GpuHealthCheck&) = delete;
  GpuHealthCheck& operator=(const GpuHealthCheck&) = delete;

  /// Starts the first reading now, for the first run() to use.
  void read_ahead();
  /// Checks the GPUs; `done` gets the problem ("" healthy) once NVML has answered, and later
  /// only when a process of `previous_round` (worker pids, or members of their process groups)
  /// still holds a GPU: then once it lets go or the reclaim timeout has passed. A node whose
  /// first reading found no GPU (or no NVML) is never checked. One at a time: a call while one
  /// waits only replaces the callback.
  void run(std::vector<pid_t> previous_round, Done done);
  bool running() const { return static_cast<bool>(done_); }

 private:
  void read();
  void wait_for_reading();
  void reading_overdue();
  void on_reading(GpuReading reading);
  void decide(const GpuReading& reading);
  bool of_previous_round(pid_t pid) const;

  Clock& clock_;
  GpuHealthSettings settings_;
  Reader read_;
  boost::asio::io_context* io_ = nullptr;  ///< set: readings on thread_
  std::unique_ptr<Timer> poll_timer_;
  std::unique_ptr<Timer> answer_timer_;      ///< a run() waiting on a reading: its timeout
  std::optional<std::vector<int>> indices_;  ///< from the first reading; empty: no checks
  std::optional<GpuReading> read_ahead_;     ///< a reading no run() has used yet
  bool reading_ = false;
  SteadyTime reading_since_{};
  std::vector<pid_t> previous_round_;
  SteadyTime reclaim_deadline_{};
  Done done_;
  /// Where thread_ hands its reading: io_, until the check ends (a thread still inside NVML
  /// then is detached, and its reading dropped).
  struct Delivery {
    std::mutex mutex;
    boost::asio::io_context* io = nullptr;
  };
  std::shared_ptr<Delivery> delivery_ = std::make_shared<Delivery>();
  std::thread thread_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  ///< readings posted after us are dropped
};

}  // namespace cohort
