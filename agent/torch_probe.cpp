#include "agent/torch_probe.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <csignal>

#include "common/log.hpp"

namespace cohort {
namespace {

// Lists sys.path for torch's metadata directory; imports nothing beyond os and sys.
constexpr const char* kProbe =
    "import os, sys\n"
    "for d in sys.path:\n"
    "    try:\n"
    "        names = os.listdir(d or '.')\n"
    "    except OSError:\n"
    "        continue\n"
    "    for n in names:\n"
    "        if n.startswith('torch-') and n.endswith(('.dist-info', '.egg-info')):\n"
    "            print(n[6:].rsplit('.', 1)[0])\n"
    "            sys.exit()\n";

std::string read_start(int fd) {
  char buffer[256];
  ssize_t n = ::pread(fd, buffer, sizeof buffer, 0);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
}

}  // namespace

namespace {

// The number of at most 4 digits at `at` in `text`, moving `at` past it; none without a digit.
std::optional<int> number_at(const std::string& text, size_t& at) {
  int value = 0;
  size_t digits = 0;
  while (at < text.size() && digits < 4 && text[at] >= '0' && text[at] <= '9') {
    value = value * 10 + (text[at++] - '0');
    ++digits;
  }
  if (digits == 0 || (at < text.size() && text[at] >= '0' && text[at] <= '9')) return std::nullopt;
  return value;
}

}  // namespace

const char* torch_probe_code() { return kProbe; }

std::optional<TorchVersion> parse_torch_version(const std::string& printed) {
  size_t at = 0;
  std::optional<int> major = number_at(printed, at);
  if (!major || at >= printed.size() || printed[at] != '.') return std::nullopt;
  std::optional<int> minor = number_at(printed, ++at);
  if (!minor) return std::nullopt;
  return TorchVersion{*major, *minor};
}

TorchProbe::TorchProbe(Clock& clock, ProcessSpawner& spawner)
    : spawner_(spawner), deadline_(clock.make_timer()) {}

TorchProbe::~TorchProbe() {
  *alive_ = false;
  if (pid_ > 0) spawner_.signal_group(pid_, SIGKILL);
  if (output_fd_ >= 0) ::close(output_fd_);
}

bool TorchProbe::start(const std::string& python, std::vector<std::string> env) {
  output_fd_ = ::memfd_create("cohort-torch-probe", MFD_CLOEXEC);
  int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  SpawnRequest request;
  request.executable = python;
  request.args = {"-c", kProbe};
  request.env = std::move(env);
  request.stdout_fd = output_fd_;
  request.stderr_fd = null_fd;
  std::error_code error;
  if (output_fd_ >= 0 && null_fd >= 0) {
    pid_ = spawner_.spawn(
        request,
        [this, alive = alive_](ExitStatus status) {
          if (*alive) finished(status);
        },
        error);
  }
  if (null_fd >= 0) ::close(null_fd);
  if (pid_ <= 0) {
    log::debug("cannot read the workers' torch version from ", python, ": ", error.message());
    return false;
  }
  deadline_->start_after(kTimeout, [this] { spawner_.signal_group(pid_, SIGKILL); });
  return true;
}

void TorchProbe::after(Done then) {
  if (!running()) return then();
  then_ = std::move(then);
}

void TorchProbe::finished(const ExitStatus& status) {
  pid_ = -1;
  deadline_->cancel();
  std::string printed = status.success() ? read_start(output_fd_) : std::string();
  version_ = parse_torch_version(printed);
  log::debug("the workers' torch: ", printed.empty() ? "unknown" : printed);
  if (Done then = std::move(then_)) then();
}

}  // namespace cohort
