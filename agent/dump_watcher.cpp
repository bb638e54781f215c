#include "agent/dump_watcher.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace cohort {
namespace {

constexpr std::chrono::milliseconds kPollInterval{100};

}  // namespace

std::optional<FileStamp> file_stamp(const std::string& path) {
  struct stat info {};
  if (path.empty() || ::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode))
    return std::nullopt;
  return FileStamp{static_cast<uint64_t>(info.st_dev), static_cast<uint64_t>(info.st_ino),
                   static_cast<uint64_t>(info.st_size),
                   int64_t{info.st_mtim.tv_sec} * 1'000'000'000 + info.st_mtim.tv_nsec};
}

std::optional<uint64_t> fresh_file_bytes(const std::string& path,
                                         const std::optional<FileStamp>& before) {
  std::optional<FileStamp> now = file_stamp(path);
  if (!now || now == before) return std::nullopt;
  return now->bytes;
}

bool request_nccl_dump(const std::string& pipe) {
  struct stat info {};
  if (pipe.empty() || ::stat(pipe.c_str(), &info) != 0 || !S_ISFIFO(info.st_mode)) return false;
  int fd = ::open(pipe.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;  // ENXIO: nobody reads it
  bool written = ::write(fd, "1\n", 2) == 2;
  ::close(fd);
  return written;
}

DumpWatcher::DumpWatcher(Clock& clock) : clock_(clock), timer_(clock.make_timer()) {}

void DumpWatcher::start(std::vector<FlightRecorderDump> asked, SteadyDuration timeout, Done done) {
  if (asked.empty()) return done({});
  wait_.emplace(std::move(asked), clock_.now(), timeout);
  done_ = std::move(done);
  timer_->start_after(kPollInterval, [this] { poll(); });
}

void DumpWatcher::look(SteadyTime now) {
  for (size_t i = 0; i < wait_->dumps().size(); ++i) {
    const FlightRecorderDump& dump = wait_->dumps()[i];
    if (!dump.complete) wait_->observe(i, fresh_file_bytes(dump.path, dump.before), now);
  }
}

void DumpWatcher::poll() {
  SteadyTime now = clock_.now();
  look(now);
  if (!wait_->finished(now)) {
    SteadyTime next = std::min(now + kPollInterval, wait_->deadline());
    return timer_->start_at(next, [this] { poll(); });
  }
  std::vector<FlightRecorderDump> found = wait_->dumps();
  wait_.reset();
  Done done = std::move(done_);
  done(std::move(found));
}

void DumpWatcher::postpone(SteadyDuration paused) {
  if (wait_) wait_->postpone(paused);
}

std::vector<FlightRecorderDump> DumpWatcher::cut_short() {
  if (!wait_) return {};
  timer_->cancel();
  look(clock_.now());
  std::vector<FlightRecorderDump> found = wait_->dumps();
  wait_.reset();
  done_ = nullptr;
  return found;
}

}  // namespace cohort
