#include "agent/log_layout.hpp"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "common/run_id.hpp"
#include "common/text.hpp"

namespace cohort {
namespace fs = std::filesystem;

LogLayout::LogLayout(std::string base_dir, std::string run_id) : base_dir_(std::move(base_dir)) {
  if (base_dir_ == "/dev/null") {
    enabled_ = false;
    return;
  }
  if (base_dir_.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/cohort_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      enabled_ = false;
      return;
    }
    base_dir_ = pattern;
    temporary_ = true;
  }
  // Absolute (as torchrun's are): a worker that changes directory still finds its error file.
  std::error_code no_cwd;
  fs::path absolute = fs::absolute(base_dir_, no_cwd).lexically_normal();
  if (!no_cwd && absolute.has_relative_path()) base_dir_ = absolute.string();
  while (base_dir_.size() > 1 && base_dir_.back() == '/') base_dir_.pop_back();
  // The launcher refuses bad run ids; this keeps any other caller inside base_dir_ too.
  std::string pattern = base_dir_ + "/" + run_id_path_component(run_id) + "_XXXXXX";
  std::error_code error;
  fs::create_directories(base_dir_, error);
  if (::mkdtemp(pattern.data()) == nullptr) {
    problem_ = cat("cannot create a log directory in ", base_dir_, ": ", std::strerror(errno));
    return;
  }
  run_dir_ = pattern;
}

LogLayout::~LogLayout() {
  if (!temporary_) return;
  std::error_code ignored;
  fs::remove_all(base_dir_, ignored);
}

std::string LogLayout::prepare_attempt(int attempt, int nproc) {
  if (!enabled_) return {};
  if (run_dir_.empty()) return problem_;
  std::error_code error;
  fs::remove_all(attempt_dir(attempt), error);  // an attempt number that came again
  for (int rank = 0; rank < nproc; ++rank) {
    fs::create_directories(rank_dir(attempt, rank), error);
    if (error)
      return "cannot create log directory " + rank_dir(attempt, rank) + ": " + error.message();
  }
  return {};
}

std::string LogLayout::rank_dir(int attempt, int local_rank) const {
  return run_dir_ + "/attempt_" + std::to_string(attempt) + "/" + std::to_string(local_rank);
}

std::string LogLayout::attempt_dir(int attempt) const {
  return enabled_ ? run_dir_ + "/attempt_" + std::to_string(attempt) : std::string();
}

std::string LogLayout::error_file(int attempt, int local_rank) const {
  return enabled_ ? rank_dir(attempt, local_rank) + "/error.json" : std::string();
}

}  // namespace cohort
