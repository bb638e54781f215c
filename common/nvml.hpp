// What NVML says about this machine's GPUs: how many, where they sit (PCI bus ids) and whether
// each is well (the processes holding it, uncorrectable ECC errors, pending row remaps or page
// retirements). NVML is loaded at run time with dlopen, so one binary runs on GPU and GPU-less
// nodes; $COHORT_NVML_LIBRARY names another library, for tests and diagnostics. It is loaded and
// initialised once per process, at the first question or in the background from
// nvml_load_in_background (nvmlInit opens every device: the slow part), and kept open until the
// process ends (nvmlShutdown is never called: it only slows every exit). Any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cohort {

/// Starts loading and initialising NVML on a thread of its own, so that the first question finds
/// it ready; a question asked meanwhile waits for it. Once per process; a later call does nothing.
void nvml_load_in_background();

/// Physical devices NVML reports; nullopt when NVML is missing or fails to initialise.
std::optional<int> nvml_device_count();

/// Each device's PCI bus id ("0000:07:00.0"), by NVML index; nullopt when NVML is missing or
/// fails.
std::optional<std::vector<std::string>> nvml_pci_bus_ids();

/// One device's health, as far as this driver reports it (what it does not support reads as
/// well).
struct GpuState {
  int index = 0;                 ///< NVML's
  std::string bus_id;            ///< "0000:07:00.0"
  std::vector<pid_t> processes;  ///< compute processes holding it
  uint64_t uncorrected_ecc = 0;  ///< volatile uncorrectable ECC errors since the driver loaded
  bool memory_repair_pending = false;  ///< a row remap or page retirement waits for a reset
  std::optional<bool> ecc_enabled;     ///< ECC mode in force; none: the GPU has no ECC
};

/// The driver's version ("550.54.15"); nullopt when NVML is missing or fails.
std::optional<std::string> nvml_driver_version();

/// Every device's state, by NVML index; nullopt when NVML is missing or fails.
std::optional<std::vector<GpuState>> nvml_gpu_states();

/// The same without ECC mode (left unset): what the health gate reads before each round. ECC mode
/// is only reported (`cohort doctor`), and asking costs about 2 ms a GPU on an H200.
std::optional<std::vector<GpuState>> nvml_gpu_health();

}  // namespace cohort
