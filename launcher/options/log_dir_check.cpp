#include "launcher/options/log_dir_check.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "common/text.hpp"

namespace cohort {
namespace {

namespace fs = std::filesystem;

// Creates and removes a file in `dir`; the error's text, or an empty string.
std::string probe_error(const std::string& dir) {
  std::string probe = dir + "/.cohort-probe-XXXXXX";
  int fd = ::mkstemp(probe.data());
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

}  // namespace

std::string log_dir_problem(const std::string& log_dir) {
  if (log_dir.empty() || log_dir == "/dev/null") return {};
  std::error_code error;
  fs::create_directories(log_dir, error);
  if (error) return cat("--log-dir ", log_dir, ": cannot create it: ", error.message());
  if (!fs::is_directory(log_dir, error)) return cat("--log-dir ", log_dir, ": not a directory");
  if (std::string failed = probe_error(log_dir); !failed.empty())
    return cat("--log-dir ", log_dir, ": cannot write files there: ", failed);
  return {};
}

}  // namespace cohort
