// Counts the GPUs a worker group may use: NVML loaded at run time with dlopen (so one binary
// runs on GPU and GPU-less nodes), filtered by CUDA_VISIBLE_DEVICES as CUDA itself reads it.
// Any thread.
#pragma once

#include <optional>
#include <string>

namespace cohort {

/// Physical devices NVML reports; nullopt when NVML is missing or fails to initialise.
std::optional<int> nvml_device_count();

/// Devices visible to CUDA: `physical` when the variable is unset; otherwise its entries up to
/// the first invalid one (an index out of range or junk), counting UUIDs ("GPU-...", "MIG-...").
int visible_gpu_count(int physical, const char* cuda_visible_devices);

}  // namespace cohort
