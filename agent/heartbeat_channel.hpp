// One worker's heartbeat descriptor (COHORT_HEARTBEAT_FD): a pipe whose write end the worker
// inherits (non-blocking, so a worker never waits on it) and whose read end the agent reads in
// its event loop. Every write is a sign of life; a line "step N" also reports the training step
// (HeartbeatLines, pure, parses them). Owned by WorkerGroup, one per worker; io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace cohort {

/// Splits heartbeat bytes into lines and keeps the last step reported ("step N", N from 0 to
/// INT64_MAX; any other line is a sign of life only). Pure.
class HeartbeatLines {
 public:
  /// Takes the bytes of one read; returns the last step a complete line in them reported.
  std::optional<int64_t> feed(std::string_view bytes);

 private:
  std::string partial_;
};

class HeartbeatChannel : public std::enable_shared_from_this<HeartbeatChannel> {
 public:
  using Beat = std::function<void(std::optional<int64_t> step)>;

  /// Makes the pipe; write_fd() < 0 when it could not.
  explicit HeartbeatChannel(boost::asio::io_context& io);
  ~HeartbeatChannel();
  HeartbeatChannel(const HeartbeatChannel&) = delete;
  HeartbeatChannel& operator=(const HeartbeatChannel&) = delete;

  /// The end the worker inherits; close it after the spawn with close_write_end().
  int write_fd() const { return write_fd_; }
  void close_write_end();
  /// Reads until end of file or close(); `beat` runs for every read with bytes in it.
  void start(Beat beat);
  void close();

 private:
  void read_more();

  boost::asio::posix::stream_descriptor pipe_;
  int write_fd_ = -1;
  Beat beat_;
  HeartbeatLines lines_;
  char buffer_[4096];
};

}  // namespace cohort
