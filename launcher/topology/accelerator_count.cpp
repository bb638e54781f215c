#include "launcher/topology/accelerator_count.hpp"

#include <array>
#include <utility>

#include "common/text.hpp"

namespace cohort {
namespace {

constexpr std::array<std::pair<const char*, const char*>, 5> kAccelerators{{
    {"xpu", "ZE_AFFINITY_MASK"},
    {"hpu", "HABANA_VISIBLE_MODULES"},
    {"npu", "ASCEND_RT_VISIBLE_DEVICES"},
    {"mlu", "MLU_VISIBLE_DEVICES"},
    {"musa", "MUSA_VISIBLE_DEVICES"},
}};

}  // namespace

std::string accelerator_devices_variable(const std::string& name) {
  for (const auto& [accelerator, variable] : kAccelerators) {
    if (name == accelerator) return variable;
  }
  return {};
}

std::string accelerator_names() {
  std::string names;
  for (const auto& entry : kAccelerators)
    names += (names.empty() ? "" : ", ") + std::string(entry.first);
  return names;
}

int listed_device_count(const std::string& value) {
  int count = 0;
  for (const auto& entry : split(value, ',')) {
    if (!trim(entry).empty()) ++count;
  }
  return count;
}

}  // namespace cohort
