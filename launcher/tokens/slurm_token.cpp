#include "launcher/tokens/slurm_token.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/text.hpp"
#include "proto/auth.hpp"

namespace cohort {
namespace {

std::string value_of(const std::map<std::string, std::string>& env, const char* name) {
  auto found = env.find(name);
  return found == env.end() ? std::string() : found->second;
}

// Writes a fresh secret to `path` unless one is there: written to a private temporary file, then
// linked into place, so that nodes starting at once all end up reading the same secret.
std::string create_secret(const std::string& path) {
  std::string temporary = cat(path, ".", ::getpid(), ".tmp");
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return cat("cannot create ", temporary, ": ", std::strerror(errno));
  std::string secret = proto::random_nonce(32) + "\n";
  bool written = ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  ::close(fd);
  int linked = written ? ::link(temporary.c_str(), path.c_str()) : -1;
  int link_error = errno;
  ::unlink(temporary.c_str());
  if (!written) return cat("cannot write ", temporary);
  if (linked != 0 && link_error != EEXIST) {
    return cat("cannot create ", path, ": ", std::strerror(link_error));
  }
  return {};
}

}  // namespace

TokenResult slurm_job_token(const std::map<std::string, std::string>& env) {
  std::string job = value_of(env, "SLURM_JOB_ID");
  if (job.empty()) return {};
  std::string home = value_of(env, "HOME");
  if (home.empty()) {
    return {{}, "inside Slurm without --token-file or COHORT_TOKEN, and no HOME for a secret"};
  }
  std::string directory = home + "/.cohort";
  if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) {
    return {{}, cat("cannot create ", directory, ": ", std::strerror(errno))};
  }
  std::string path = directory + "/secret";
  if (::access(path.c_str(), F_OK) != 0) {
    if (std::string error = create_secret(path); !error.empty()) return {{}, error};
  }
  TokenResult secret = load_token(path, {});
  if (!secret.error.empty()) return secret;
  return {proto::derive_run_token(secret.token, "slurm-job-" + job), {}};
}

}  // namespace cohort
