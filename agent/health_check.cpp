#include "agent/health_check.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <csignal>

#include "common/text.hpp"

namespace cohort {
namespace {

constexpr size_t kMaxQuotedBytes = 2048;
constexpr size_t kMaxQuotedLines = 5;

// The last lines of `output`, within kMaxQuotedBytes and kMaxQuotedLines, joined by " | ".
std::string output_tail(const std::string& output) {
  std::string text =
      output.size() > kMaxQuotedBytes ? output.substr(output.size() - kMaxQuotedBytes) : output;
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  if (lines.size() > kMaxQuotedLines) lines.erase(lines.begin(), lines.end() - kMaxQuotedLines);
  return escape_for_terminal(join(lines, " | "));
}

std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) {
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace

std::string health_problem(const ExitStatus& status, bool timed_out,
                           std::chrono::milliseconds timeout, const std::string& output) {
  if (!timed_out && status.success()) return {};
  std::string problem =
      timed_out ? cat("the health check ran past its ", timeout.count() / 1000.0, " s timeout")
                : "the health check failed with " + status.describe();
  std::string tail = output_tail(output);
  return tail.empty() ? problem : problem + ": " + tail;
}

HealthCheck::HealthCheck(boost::asio::io_context& io, ProcessSpawner& spawner,
                         HealthSettings settings, std::vector<std::string> env)
    : spawner_(spawner), settings_(std::move(settings)), env_(std::move(env)), deadline_(io) {}

HealthCheck::~HealthCheck() {
  *alive_ = false;  // the command's end, reaped later, finds no check
  if (pid_ > 0) spawner_.signal_group(pid_, SIGKILL);
  if (output_fd_ >= 0) ::close(output_fd_);
}

void HealthCheck::run(Done done) {
  done_ = std::move(done);
  if (running()) return;
  if (output_fd_ >= 0) ::close(output_fd_);
  output_fd_ = ::memfd_create("cohort-health-check", MFD_CLOEXEC);
  SpawnRequest request;
  request.executable = "/bin/sh";
  request.args = {"-c", settings_.command};
  request.env = env_;
  request.stdout_fd = output_fd_;
  request.stderr_fd = output_fd_;
  std::error_code error;
  timed_out_ = false;
  pid_ = spawner_.spawn(
      request,
      [this, alive = alive_](ExitStatus status) {
        if (*alive) finished(status);
      },
      error);
  if (pid_ < 0) {
    Done report = std::move(done_);
    report("the health check could not start: " + error.message());
    return;
  }
  deadline_.expires_after(settings_.timeout);
  deadline_.async_wait([this](const boost::system::error_code& waited) {
    if (waited || pid_ <= 0) return;
    timed_out_ = true;
    spawner_.signal_group(pid_, SIGKILL);  // the command and all it started
  });
}

void HealthCheck::finished(const ExitStatus& status) {
  pid_ = -1;
  deadline_.cancel();
  std::string output = output_fd_ >= 0 ? read_all(output_fd_) : std::string();
  Done report = std::move(done_);
  if (report) report(health_problem(status, timed_out_, settings_.timeout, output));
}

}  // namespace cohort
