#include "launcher/gpu_count.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "common/text.hpp"

namespace cohort {
namespace {

// nvmlPciInfo_t (nvml.h), as nvmlDeviceGetPciInfo_v3 fills it.
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};

// NVML loaded and initialised for the length of one question; shut down and closed after.
class NvmlSession {
 public:
  NvmlSession() {
    const char* path = std::getenv("COHORT_NVML_LIBRARY");  // tests and diagnostics
    library_ = ::dlopen(path != nullptr && *path != '\0' ? path : "libnvidia-ml.so.1",
                        RTLD_NOW | RTLD_LOCAL);
    if (library_ == nullptr) return;
    auto init = symbol<int (*)()>("nvmlInit_v2");
    ready_ = init != nullptr && init() == 0;
  }
  ~NvmlSession() {
    if (ready_) {
      if (auto shutdown = symbol<int (*)()>("nvmlShutdown")) shutdown();
    }
    if (library_ != nullptr) ::dlclose(library_);
  }
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;

  bool ready() const { return ready_; }

  template <typename Fn>
  Fn symbol(const char* name) const {
    return reinterpret_cast<Fn>(::dlsym(library_, name));
  }

  std::optional<int> device_count() const {
    auto count = symbol<int (*)(unsigned int*)>("nvmlDeviceGetCount_v2");
    unsigned int devices = 0;
    if (!ready_ || count == nullptr || count(&devices) != 0) return std::nullopt;
    return static_cast<int>(devices);
  }

 private:
  void* library_ = nullptr;
  bool ready_ = false;
};

}  // namespace

std::optional<int> nvml_device_count() { return NvmlSession().device_count(); }

std::optional<std::vector<std::string>> nvml_pci_bus_ids() {
  NvmlSession nvml;
  std::optional<int> count = nvml.device_count();
  auto handle_of = nvml.symbol<int (*)(unsigned int, void**)>("nvmlDeviceGetHandleByIndex_v2");
  auto pci_info = nvml.symbol<int (*)(void*, NvmlPciInfo*)>("nvmlDeviceGetPciInfo_v3");
  if (!count || handle_of == nullptr || pci_info == nullptr) return std::nullopt;
  std::vector<std::string> bus_ids;
  for (unsigned int index = 0; index < static_cast<unsigned int>(*count); ++index) {
    void* device = nullptr;
    NvmlPciInfo info{};
    if (handle_of(index, &device) != 0 || pci_info(device, &info) != 0) return std::nullopt;
    char text[32];
    std::snprintf(text, sizeof text, "%04x:%02x:%02x.0", info.domain, info.bus, info.device);
    bus_ids.emplace_back(text);
  }
  return bus_ids;
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
