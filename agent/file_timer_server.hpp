// Serves torchrun's FileTimer pipe (TORCHELASTIC_ENABLE_FILE_TIMER=1): makes the named pipe at
// the path workers get as TORCHELASTIC_TIMER_FILE, reads FileTimerClient's requests in the event
// loop, keeps them in FileTimers and, on one timer set to the earliest expiration, hands each
// expired (pid, signal, scope) to the owner, which reaps that worker. Owned by the Agent for the
// whole run; io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <string>

#include "agent/file_timers.hpp"
#include "common/clock.hpp"
#include "common/log_throttle.hpp"

namespace cohort {

class FileTimerServer {
 public:
  using Expired = std::function<void(const ExpiredTimer&)>;

  using IsWorker = std::function<bool(pid_t)>;

  /// Requests for a pid `is_worker` does not know are ignored (they would take the places of
  /// the workers' own scopes).
  FileTimerServer(boost::asio::io_context& io, std::string path, Expired expired,
                  IsWorker is_worker);
  /// Removes the pipe, if start() made it.
  ~FileTimerServer();
  FileTimerServer(const FileTimerServer&) = delete;
  FileTimerServer& operator=(const FileTimerServer&) = delete;

  /// Makes the pipe and starts reading. Returns an error message, empty on success. What is at
  /// the path is replaced only if it is a pipe of this user; anything else is refused untouched.
  std::string start();
  /// Forgets every timer (the workers they were for are gone).
  void clear();
  /// Every timer expires `paused` later (the agent and its workers were stopped that long).
  void postpone(SteadyDuration paused);
  const std::string& path() const { return path_; }

 private:
  std::string refuse_existing() const;
  void read_more();
  void consume(std::string_view bytes);
  void arm();

  std::string path_;
  Expired expired_;
  IsWorker is_worker_;
  boost::asio::posix::stream_descriptor pipe_;
  bool made_ = false;   ///< start() made the pipe: the destructor removes it
  int keep_open_ = -1;  ///< our own writer, so that the pipe never reads end of file
  boost::asio::steady_timer timer_;
  FileTimers timers_;
  std::string partial_;
  LogThrottle refusals_;  ///< one warning a second for requests it ignores
  char buffer_[4096];
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  ///< for handlers run after us
};

}  // namespace cohort
