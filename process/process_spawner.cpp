#include "process/process_spawner.hpp"

#include <unistd.h>

#include "common/text.hpp"

namespace cohort {

std::string find_executable(const std::string& name, const std::string& path_variable) {
  if (name.find('/') != std::string::npos) return name;
  for (const auto& dir : split(path_variable, ':')) {
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

}  // namespace cohort
