// A test double of NVML (libnvidia-ml.so.1) for machines without GPUs: cohort dlopens it when
// COHORT_NVML_LIBRARY names it. Its GPUs are the PCI bus ids listed in COHORT_FAKE_NVML_BUS_IDS
// ("0000:07:00.0,0000:0b:00.0"), by NVML index. COHORT_FAKE_NVML_STATE names a file, read again
// at every call so a test can change the machine under a running agent, with lines
//   bus_ids 0000:07:00.0,0000:0b:00.0   (replaces the variable's list)
//   process INDEX PID                   (a compute process holding GPU INDEX)
//   ecc INDEX COUNT                     (volatile uncorrectable ECC errors)
//   remap_pending INDEX                 (a row remap waiting for a reset)
//   ecc_off INDEX                       (ECC mode off; it is on otherwise)
//   driver VERSION                      (nvmlSystemGetDriverVersion's; "550.54.15" otherwise)
//   init_fails                          (nvmlInit_v2 fails: no usable driver; cohort
//                                       initialises NVML once per process)
// COHORT_FAKE_NVML_INIT_MS, COHORT_FAKE_NVML_SHUTDOWN_MS and COHORT_FAKE_NVML_QUERY_MS make
// nvmlInit_v2, nvmlShutdown and each device query as slow as a real driver (for the launch
// benchmark); COHORT_FAKE_NVML_CALLS names a file that gets each device query's name. Only the
// calls cohort makes are exported.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct PciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};

struct ProcessInfo {  // nvmlProcessInfo_t
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

struct Machine {
  std::vector<std::string> bus_ids;
  std::map<unsigned int, std::vector<unsigned int>> processes;
  std::map<unsigned int, unsigned long long> ecc;
  std::map<unsigned int, bool> remap_pending;
  std::map<unsigned int, bool> ecc_off;
  std::string driver = "550.54.15";
  bool init_fails = false;
};

std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    items.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

Machine machine() {
  Machine m;
  const char* ids = std::getenv("COHORT_FAKE_NVML_BUS_IDS");
  m.bus_ids = split_commas(ids != nullptr ? ids : "");
  const char* state = std::getenv("COHORT_FAKE_NVML_STATE");
  if (state == nullptr) return m;
  std::ifstream file(state);
  std::string line;
  while (std::getline(file, line)) {
    std::istringstream words(line);
    std::string what;
    unsigned int index = 0;
    words >> what;
    if (what == "bus_ids") {
      std::string list;
      words >> list;
      m.bus_ids = split_commas(list);
    } else if (what == "process") {
      unsigned int pid = 0;
      if (words >> index >> pid) m.processes[index].push_back(pid);
    } else if (what == "ecc") {
      unsigned long long count = 0;
      if (words >> index >> count) m.ecc[index] = count;
    } else if (what == "remap_pending") {
      if (words >> index) m.remap_pending[index] = true;
    } else if (what == "ecc_off") {
      if (words >> index) m.ecc_off[index] = true;
    } else if (what == "driver") {
      words >> m.driver;
    } else if (what == "init_fails") {
      m.init_fails = true;
    }
  }
  return m;
}

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kUninitialized = 1;
constexpr int kInsufficientSize = 7;

// Sleeps for the milliseconds the variable `name` says (none when it is unset).
void take_time(const char* name) {
  const char* ms = std::getenv(name);
  if (ms != nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

// A device query: as slow as COHORT_FAKE_NVML_QUERY_MS says, and its name appended to the file
// COHORT_FAKE_NVML_CALLS names (when set), one line each.
void device_query(const char* name) {
  take_time("COHORT_FAKE_NVML_QUERY_MS");
  if (const char* calls = std::getenv("COHORT_FAKE_NVML_CALLS"))
    std::ofstream(calls, std::ios::app) << name << "\n";
}

size_t index_of(void* device) {
  return static_cast<size_t>(reinterpret_cast<uintptr_t>(device)) - 1;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  take_time("COHORT_FAKE_NVML_INIT_MS");
  return machine().init_fails ? kUninitialized : kSuccess;
}
int nvmlShutdown() {
  take_time("COHORT_FAKE_NVML_SHUTDOWN_MS");
  return kSuccess;
}

int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned int>(machine().bus_ids.size());
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= machine().bus_ids.size()) return kInvalidArgument;
  *device = reinterpret_cast<void*>(static_cast<uintptr_t>(index) + 1);
  return kSuccess;
}

int nvmlDeviceGetPciInfo_v3(void* device, PciInfo* info) {
  device_query("nvmlDeviceGetPciInfo_v3");
  std::vector<std::string> ids = machine().bus_ids;
  size_t index = index_of(device);
  if (index >= ids.size()) return kInvalidArgument;
  std::memset(info, 0, sizeof *info);
  if (std::sscanf(ids[index].c_str(), "%x:%x:%x", &info->domain, &info->bus, &info->device) != 3)
    return kInvalidArgument;
  std::snprintf(info->bus_id, sizeof info->bus_id, "%08x:%02x:%02x.0", info->domain, info->bus,
                info->device);
  return kSuccess;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count, ProcessInfo* infos) {
  device_query("nvmlDeviceGetComputeRunningProcesses_v3");
  Machine m = machine();
  std::vector<unsigned int> pids = m.processes[static_cast<unsigned int>(index_of(device))];
  if (*count < pids.size()) {
    *count = static_cast<unsigned int>(pids.size());
    return kInsufficientSize;
  }
  *count = static_cast<unsigned int>(pids.size());
  for (size_t i = 0; i < pids.size(); ++i) infos[i] = ProcessInfo{pids[i], 1 << 20, 0, 0};
  return kSuccess;
}

int nvmlDeviceGetTotalEccErrors(void* device, int error_type, int counter_type,
                                unsigned long long* count) {
  device_query("nvmlDeviceGetTotalEccErrors");
  if (error_type != 1 || counter_type != 0) return kInvalidArgument;  // uncorrected, volatile
  *count = machine().ecc[static_cast<unsigned int>(index_of(device))];
  return kSuccess;
}

int nvmlDeviceGetRemappedRows(void* device, unsigned int* corrected, unsigned int* uncorrected,
                              unsigned int* pending, unsigned int* failed) {
  device_query("nvmlDeviceGetRemappedRows");
  bool waiting = machine().remap_pending[static_cast<unsigned int>(index_of(device))];
  *corrected = 0;
  *uncorrected = waiting ? 1 : 0;
  *pending = waiting ? 1 : 0;
  *failed = 0;
  return kSuccess;
}

int nvmlDeviceGetEccMode(void* device, int* current, int* pending) {
  device_query("nvmlDeviceGetEccMode");
  bool off = machine().ecc_off[static_cast<unsigned int>(index_of(device))];
  *current = off ? 0 : 1;
  *pending = *current;
  return kSuccess;
}

int nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  std::string driver = machine().driver;
  if (length <= driver.size()) return kInsufficientSize;
  std::memcpy(version, driver.c_str(), driver.size() + 1);
  return kSuccess;
}

}  // extern "C"
