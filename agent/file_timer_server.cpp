#include "agent/file_timer_server.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/log.hpp"
#include "common/text.hpp"

namespace cohort {
namespace {

constexpr size_t kMaxLine = 4096;  // PIPE_BUF: a client's request is one atomic write

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

FileTimerServer::FileTimerServer(boost::asio::io_context& io, std::string path, Expired expired,
                                 IsWorker is_worker)
    : path_(std::move(path)),
      expired_(std::move(expired)),
      is_worker_(std::move(is_worker)),
      pipe_(io),
      timer_(io) {}

FileTimerServer::~FileTimerServer() {
  *alive_ = false;
  timer_.cancel();
  boost::system::error_code ignored;
  pipe_.close(ignored);
  if (keep_open_ >= 0) ::close(keep_open_);
  if (made_) ::unlink(path_.c_str());
}

// What is at the path already: nothing, or a pipe of this user (a FileTimer pipe an earlier run
// left), is fine; anything else (a file, a link, another user's pipe) is not ours to remove.
std::string FileTimerServer::refuse_existing() const {
  struct stat info {};
  if (::lstat(path_.c_str(), &info) != 0) return {};
  if (S_ISFIFO(info.st_mode) && info.st_uid == ::geteuid()) return {};
  return cat("TORCHELASTIC_TIMER_FILE ", path_,
             " exists and is not a FileTimer pipe of this user: left alone");
}

std::string FileTimerServer::start() {
  if (std::string refused = refuse_existing(); !refused.empty()) return refused;
  ::unlink(path_.c_str());  // a stale pipe, as torchrun's server replaces it
  if (::mkfifo(path_.c_str(), 0600) != 0)
    return "cannot make the FileTimer pipe " + path_ + ": " + std::strerror(errno);
  made_ = true;
  int fd = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "cannot open the FileTimer pipe " + path_ + ": " + std::strerror(errno);
  keep_open_ = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  pipe_.assign(fd);
  read_more();
  return {};
}

void FileTimerServer::clear() {
  timers_.clear();
  timer_.cancel();
}

void FileTimerServer::postpone(SteadyDuration paused) {
  timers_.postpone(std::chrono::duration<double>(paused).count());
  arm();
}

void FileTimerServer::read_more() {
  pipe_.async_read_some(
      boost::asio::buffer(buffer_),
      [this, alive = alive_](const boost::system::error_code& error, size_t size) {
        if (!*alive) return;
        if (size > 0) consume(std::string_view(buffer_, size));
        if (!error) read_more();
      });
}

void FileTimerServer::consume(std::string_view bytes) {
  for (char c : bytes) {
    if (c != '\n') {
      if (partial_.size() < kMaxLine) partial_.push_back(c);
      continue;
    }
    std::string error;
    auto request = parse_timer_request(partial_, error);
    if (request && !is_worker_(request->pid)) {
      error = cat("pid ", request->pid, " is none of this node's workers");
    } else if (request && !timers_.apply(*request)) {
      error = cat("more than ", FileTimers::kMaxTimers, " scopes at once");
    }
    if (!error.empty() && refusals_.due(std::chrono::steady_clock::now())) {
      log::warn("FileTimer pipe: ignoring a request (", error, ")",
                refusals_.suppressed() ? cat("; ", refusals_.suppressed(), " more left out") : "");
    }
    partial_.clear();
  }
  arm();
}

// One timer, at the earliest expiration; the protocol's times are the wall clock's.
void FileTimerServer::arm() {
  auto next = timers_.next_expiration();
  if (!next) return (void)timer_.cancel();
  timer_.expires_after(timer_wait(*next, wall_seconds()));
  timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (error || !*alive) return;
    for (const ExpiredTimer& expired : timers_.take_expired(wall_seconds())) expired_(expired);
    arm();
  });
}

}  // namespace cohort
