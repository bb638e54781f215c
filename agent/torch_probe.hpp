// Which torch the workers' Python interpreter has, read once per agent from its installed
// package metadata (the torch-<version>.dist-info or .egg-info directory on its sys.path),
// without importing torch: `python -c` with the agent's environment, killed after a deadline.
// The worker environment follows it (async_error_handling, worker_env.hpp). Started by the agent
// before it connects, so it overlaps with reaching the rendezvous; a failure means "unknown".
// Owned by the Agent; io thread only.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "process/process_spawner.hpp"

namespace cohort {

/// A torch release, as far as cohort's worker environment cares.
struct TorchVersion {
  int major = 0;
  int minor = 0;
};

/// The version in what the probe printed ("2.6.0+debian\n" -> 2.6); none when it printed no
/// version.
std::optional<TorchVersion> parse_torch_version(const std::string& printed);

/// The Python code the probe runs (`python -c`): prints torch's version from its package
/// metadata ("2.6.0+debian"), or nothing without torch; imports nothing beyond os and sys.
const char* torch_probe_code();

class TorchProbe {
 public:
  using Done = std::function<void()>;
  static constexpr std::chrono::seconds kTimeout{3};

  TorchProbe(Clock& clock, ProcessSpawner& spawner);
  ~TorchProbe();
  TorchProbe(const TorchProbe&) = delete;
  TorchProbe& operator=(const TorchProbe&) = delete;

  /// Runs `python` with `env`; false when it cannot start (the version stays unknown).
  bool start(const std::string& python, std::vector<std::string> env);
  bool running() const { return pid_ > 0; }
  /// `then` runs once the probe has ended (at once if it is not running); a later call replaces
  /// an earlier one that has not run.
  void after(Done then);
  /// torch's version; none: unknown (no torch found, or the probe failed or timed out).
  std::optional<TorchVersion> version() const { return version_; }

 private:
  void finished(const ExitStatus& status);

  ProcessSpawner& spawner_;
  std::unique_ptr<Timer> deadline_;
  pid_t pid_ = -1;
  int output_fd_ = -1;
  std::optional<TorchVersion> version_;
  Done then_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cohort
