#include "launcher/gpu_count.hpp"

#include <dlfcn.h>

#include "common/text.hpp"

namespace cohort {

std::optional<int> nvml_device_count() {
  void* nvml = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) return std::nullopt;
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned int*);
  auto init = reinterpret_cast<InitFn>(::dlsym(nvml, "nvmlInit_v2"));
  auto count = reinterpret_cast<CountFn>(::dlsym(nvml, "nvmlDeviceGetCount_v2"));
  auto shutdown = reinterpret_cast<InitFn>(::dlsym(nvml, "nvmlShutdown"));
  std::optional<int> result;
  if (init != nullptr && count != nullptr && init() == 0) {
    unsigned int devices = 0;
    if (count(&devices) == 0) result = static_cast<int>(devices);
    if (shutdown != nullptr) shutdown();
  }
  ::dlclose(nvml);
  return result;
}

int visible_gpu_count(int physical, const char* cuda_visible_devices) {
  if (cuda_visible_devices == nullptr) return physical;
  int visible = 0;
  for (const auto& raw : split(cuda_visible_devices, ',')) {
    std::string entry(trim(raw));
    if (entry.rfind("GPU-", 0) == 0 || entry.rfind("MIG-", 0) == 0) {
      ++visible;
      continue;
    }
    auto index = parse_int(entry);
    if (!index || *index < 0 || *index >= physical) break;
    ++visible;
  }
  return visible;
}

}  // namespace cohort
