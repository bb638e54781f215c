#include "common/nvml.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <future>

#include "common/signal_blocking.hpp"

namespace cohort {
namespace {

constexpr int kNvmlSuccess = 0;
constexpr int kNvmlInsufficientSize = 7;
constexpr int kUncorrectedErrors = 1;  // nvmlMemoryErrorType_t
constexpr int kVolatileCounter = 0;    // nvmlEccCounterType_t
constexpr unsigned int kMaxProcesses = 4096;

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

// nvmlProcessInfo_t (nvml.h), as nvmlDeviceGetComputeRunningProcesses_v3 fills it.
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

using Device = void*;

// NVML loaded and initialised, for the life of the process (session()): never shut down, since
// nvmlShutdown costs several milliseconds at every exit and the process's end releases it anyway.
class NvmlSession {
 public:
  NvmlSession() {
    const char* path = std::getenv("COHORT_NVML_LIBRARY");  // tests and diagnostics
    library_ = ::dlopen(path != nullptr && *path != '\0' ? path : "libnvidia-ml.so.1",
                        RTLD_NOW | RTLD_LOCAL);
    if (library_ == nullptr) return;
    auto init = symbol<int (*)()>("nvmlInit_v2");
    ready_ = init != nullptr && init() == kNvmlSuccess;
  }
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;

  template <typename Fn>
  Fn symbol(const char* name) const {
    return library_ == nullptr ? nullptr : reinterpret_cast<Fn>(::dlsym(library_, name));
  }

  std::optional<int> device_count() const {
    auto count = symbol<int (*)(unsigned int*)>("nvmlDeviceGetCount_v2");
    unsigned int devices = 0;
    if (!ready_ || count == nullptr || count(&devices) != kNvmlSuccess) return std::nullopt;
    return static_cast<int>(devices);
  }

  std::optional<Device> device(int index) const {
    auto handle_of = symbol<int (*)(unsigned int, Device*)>("nvmlDeviceGetHandleByIndex_v2");
    Device device = nullptr;
    if (handle_of == nullptr || handle_of(static_cast<unsigned int>(index), &device) != 0)
      return std::nullopt;
    return device;
  }

  std::optional<std::string> bus_id(Device device) const {
    auto pci_info = symbol<int (*)(Device, NvmlPciInfo*)>("nvmlDeviceGetPciInfo_v3");
    NvmlPciInfo info{};
    if (pci_info == nullptr || pci_info(device, &info) != kNvmlSuccess) return std::nullopt;
    char text[32];
    std::snprintf(text, sizeof text, "%04x:%02x:%02x.0", info.domain, info.bus, info.device);
    return std::string(text);
  }

  std::vector<pid_t> processes(Device device) const {
    auto running = symbol<int (*)(Device, unsigned int*, NvmlProcessInfo*)>(
        "nvmlDeviceGetComputeRunningProcesses_v3");
    if (running == nullptr) return {};
    std::vector<NvmlProcessInfo> infos(16);
    unsigned int count = static_cast<unsigned int>(infos.size());
    int result = running(device, &count, infos.data());
    if (result == kNvmlInsufficientSize && count <= kMaxProcesses) {
      infos.resize(count + 8);  // room for processes started meanwhile
      count = static_cast<unsigned int>(infos.size());
      result = running(device, &count, infos.data());
    }
    std::vector<pid_t> pids;
    if (result != kNvmlSuccess) return pids;
    for (unsigned int i = 0; i < count && i < infos.size(); ++i)
      pids.push_back(static_cast<pid_t>(infos[i].pid));
    return pids;
  }

  uint64_t uncorrected_ecc(Device device) const {
    auto total =
        symbol<int (*)(Device, int, int, unsigned long long*)>("nvmlDeviceGetTotalEccErrors");
    unsigned long long errors = 0;
    if (total == nullptr ||
        total(device, kUncorrectedErrors, kVolatileCounter, &errors) != kNvmlSuccess)
      return 0;  // ECC off or not supported
    return errors;
  }

  std::optional<bool> ecc_enabled(Device device) const {
    auto mode = symbol<int (*)(Device, int*, int*)>("nvmlDeviceGetEccMode");
    int current = 0, pending = 0;
    if (mode == nullptr || mode(device, &current, &pending) != kNvmlSuccess) return std::nullopt;
    return current != 0;
  }

  std::optional<std::string> driver_version() const {
    auto version = symbol<int (*)(char*, unsigned int)>("nvmlSystemGetDriverVersion");
    char text[96] = {};
    if (!ready_ || version == nullptr || version(text, sizeof text - 1) != kNvmlSuccess)
      return std::nullopt;
    return std::string(text);
  }

  bool memory_repair_pending(Device device) const {
    // Ampere and later remap rows; earlier GPUs retire pages. Either waits for a GPU reset.
    auto remapped =
        symbol<int (*)(Device, unsigned int*, unsigned int*, unsigned int*, unsigned int*)>(
            "nvmlDeviceGetRemappedRows");
    unsigned int corrected = 0, uncorrected = 0, pending = 0, failed = 0;
    if (remapped != nullptr &&
        remapped(device, &corrected, &uncorrected, &pending, &failed) == kNvmlSuccess)
      return pending != 0 || failed != 0;
    auto retired = symbol<int (*)(Device, int*)>("nvmlDeviceGetRetiredPagesPendingStatus");
    int retire_pending = 0;
    return retired != nullptr && retired(device, &retire_pending) == kNvmlSuccess &&
           retire_pending != 0;
  }

 private:
  void* library_ = nullptr;
  bool ready_ = false;
};

const NvmlSession& session() {
  static const NvmlSession* nvml = new NvmlSession;  // never destroyed: see NvmlSession
  return *nvml;
}

// The loading started by nvml_load_in_background; waited for at exit, so that no thread is
// inside the driver while the process ends.
std::future<void>& background_load() {
  static std::future<void> load;
  return load;
}

}  // namespace

void nvml_load_in_background() {
  std::future<void>& load = background_load();
  if (load.valid()) return;
  SignalsBlocked for_the_thread;
  load = std::async(std::launch::async, [] { session(); });
}

std::optional<int> nvml_device_count() { return session().device_count(); }

std::optional<std::vector<std::string>> nvml_pci_bus_ids() {
  const NvmlSession& nvml = session();
  std::optional<int> count = nvml.device_count();
  if (!count) return std::nullopt;
  std::vector<std::string> bus_ids;
  for (int index = 0; index < *count; ++index) {
    std::optional<Device> device = nvml.device(index);
    std::optional<std::string> bus_id = device ? nvml.bus_id(*device) : std::nullopt;
    if (!bus_id) return std::nullopt;
    bus_ids.push_back(*bus_id);
  }
  return bus_ids;
}

std::optional<std::string> nvml_driver_version() { return session().driver_version(); }

namespace {

std::optional<std::vector<GpuState>> read_gpu_states(bool with_ecc_mode) {
  const NvmlSession& nvml = session();
  std::optional<int> count = nvml.device_count();
  if (!count) return std::nullopt;
  std::vector<GpuState> states;
  for (int index = 0; index < *count; ++index) {
    std::optional<Device> device = nvml.device(index);
    if (!device) return std::nullopt;
    GpuState state;
    state.index = index;
    state.bus_id = nvml.bus_id(*device).value_or("");
    state.processes = nvml.processes(*device);
    state.uncorrected_ecc = nvml.uncorrected_ecc(*device);
    state.memory_repair_pending = nvml.memory_repair_pending(*device);
    if (with_ecc_mode) state.ecc_enabled = nvml.ecc_enabled(*device);
    states.push_back(std::move(state));
  }
  return states;
}

}  // namespace

std::optional<std::vector<GpuState>> nvml_gpu_states() { return read_gpu_states(true); }

std::optional<std::vector<GpuState>> nvml_gpu_health() { return read_gpu_states(false); }

}  // namespace cohort
