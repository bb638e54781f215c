#include "launcher/topology/visible_gpus.hpp"

#include <string>

#include "common/text.hpp"

namespace cohort {
namespace {

bool is_uuid(const std::string& entry) {
  return entry.rfind("GPU-", 0) == 0 || entry.rfind("MIG-", 0) == 0;
}

}  // namespace

int visible_gpu_count(int physical, const char* cuda_visible_devices) {
  if (cuda_visible_devices == nullptr) return physical;
  int visible = 0;
  for (const auto& raw : split(cuda_visible_devices, ',')) {
    std::string entry(trim(raw));
    if (is_uuid(entry)) {
      ++visible;
      continue;
    }
    auto index = parse_int(entry);
    if (!index || *index < 0 || *index >= physical) break;
    ++visible;
  }
  return visible;
}

std::optional<std::vector<int>> visible_gpu_indices(int physical,
                                                    const char* cuda_visible_devices) {
  std::vector<int> indices;
  if (cuda_visible_devices == nullptr) {
    for (int index = 0; index < physical; ++index) indices.push_back(index);
    return indices;
  }
  for (const auto& raw : split(cuda_visible_devices, ',')) {
    std::string entry(trim(raw));
    if (is_uuid(entry)) return std::nullopt;
    auto index = parse_int(entry);
    if (!index || *index < 0 || *index >= physical) break;
    indices.push_back(*index);
  }
  return indices;
}

}  // namespace cohort
