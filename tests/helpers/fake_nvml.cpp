// A test double of NVML (libnvidia-ml.so.1) for machines without GPUs: cohort dlopens it when
// COHORT_NVML_LIBRARY names it. Its GPUs are the PCI bus ids listed in COHORT_FAKE_NVML_BUS_IDS
// ("0000:07:00.0,0000:0b:00.0"), by NVML index; only the calls cohort makes are exported.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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

std::vector<std::string> bus_ids() {
  std::vector<std::string> ids;
  const char* text = std::getenv("COHORT_FAKE_NVML_BUS_IDS");
  std::string list = text != nullptr ? text : "";
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    ids.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return ids;
}

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;

}  // namespace

extern "C" {

int nvmlInit_v2() { return kSuccess; }
int nvmlShutdown() { return kSuccess; }

int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned int>(bus_ids().size());
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= bus_ids().size()) return kInvalidArgument;
  *device = reinterpret_cast<void*>(static_cast<uintptr_t>(index) + 1);
  return kSuccess;
}

int nvmlDeviceGetPciInfo_v3(void* device, PciInfo* info) {
  auto index = static_cast<size_t>(reinterpret_cast<uintptr_t>(device)) - 1;
  std::vector<std::string> ids = bus_ids();
  if (index >= ids.size()) return kInvalidArgument;
  std::memset(info, 0, sizeof *info);
  if (std::sscanf(ids[index].c_str(), "%x:%x:%x", &info->domain, &info->bus, &info->device) != 3)
    return kInvalidArgument;
  std::snprintf(info->bus_id, sizeof info->bus_id, "%08x:%02x:%02x.0", info->domain, info->bus,
                info->device);
  return kSuccess;
}

}  // extern "C"
