// The GPUs a worker group may use, as CUDA reads CUDA_VISIBLE_DEVICES: how many, and which NVML
// indices. Pure; any thread.
#pragma once

#include <optional>
#include <vector>

namespace cohort {

/// Devices visible to CUDA: `physical` when the variable is unset; otherwise its entries up to
/// the first invalid one (an index out of range or junk), counting UUIDs ("GPU-...", "MIG-...").
int visible_gpu_count(int physical, const char* cuda_visible_devices);

/// The NVML indices of the visible devices, in CUDA's order; every index when the variable is
/// unset. nullopt when an entry names a device by UUID (which only NVML can place).
std::optional<std::vector<int>> visible_gpu_indices(int physical, const char* cuda_visible_devices);

}  // namespace cohort
