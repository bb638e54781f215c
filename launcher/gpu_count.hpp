// Counts the GPUs a worker group may use, and where they sit: NVML loaded at run time with
// dlopen (so one binary runs on GPU and GPU-less nodes; $COHORT_NVML_LIBRARY names another
// library, for tests and diagnostics), filtered by CUDA_VISIBLE_DEVICES as CUDA itself reads it.
// Any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace cohort {

/// Physical devices NVML reports; nullopt when NVML is missing or fails to initialise.
std::optional<int> nvml_device_count();

/// Each device's PCI bus id ("0000:07:00.0"), by NVML index; nullopt when NVML is missing or
/// fails.
std::optional<std::vector<std::string>> nvml_pci_bus_ids();

/// Devices visible to CUDA: `physical` when the variable is unset; otherwise its entries up to
/// the first invalid one (an index out of range or junk), counting UUIDs ("GPU-...", "MIG-...").
int visible_gpu_count(int physical, const char* cuda_visible_devices);

}  // namespace cohort
