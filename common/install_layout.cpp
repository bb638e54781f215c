#include "common/install_layout.hpp"

#include <filesystem>
#include <system_error>

namespace cohort {

std::string own_executable_dir() {
  std::error_code error;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return {};
  return exe.parent_path().string();
}

std::string python_module_dir_for(const std::string& bin_dir) {
  return (std::filesystem::path(bin_dir).parent_path() / "share" / "cohort" / "python").string();
}

std::string installed_python_module_dir() {
  std::string bin_dir = own_executable_dir();
  if (bin_dir.empty()) return {};
  std::string dir = python_module_dir_for(bin_dir);
  std::error_code error;
  return std::filesystem::exists(dir + "/cohort_heartbeat.py", error) ? dir : "";
}

}  // namespace cohort
