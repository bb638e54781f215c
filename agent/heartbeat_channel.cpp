#include "agent/heartbeat_channel.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>

namespace cohort {
namespace {

constexpr size_t kMaxLine = 256;

std::optional<int64_t> step_of(std::string_view line) {
  constexpr std::string_view kStep = "step ";
  if (line.substr(0, kStep.size()) != kStep) return std::nullopt;
  line.remove_prefix(kStep.size());
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  int64_t step = 0;
  auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), step);
  if (error != std::errc() || end != line.data() + line.size()) return std::nullopt;
  if (step < 0) return std::nullopt;  // a count of steps; a negative one is no step
  return step;
}

}  // namespace

std::optional<int64_t> HeartbeatLines::feed(std::string_view bytes) {
  std::optional<int64_t> last;
  for (char c : bytes) {
    if (c != '\n') {
      if (partial_.size() < kMaxLine) partial_.push_back(c);
      continue;
    }
    if (auto step = step_of(partial_)) last = step;
    partial_.clear();
  }
  return last;
}

HeartbeatChannel::HeartbeatChannel(boost::asio::io_context& io) : pipe_(io) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  // The worker's end never blocks it: a full pipe drops the beat (the agent reads at once).
  ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  pipe_.assign(fds[0]);
  write_fd_ = fds[1];
}

HeartbeatChannel::~HeartbeatChannel() {
  close_write_end();
  close();
}

void HeartbeatChannel::close_write_end() {
  if (write_fd_ >= 0) ::close(write_fd_);
  write_fd_ = -1;
}

void HeartbeatChannel::start(Beat beat) {
  beat_ = std::move(beat);
  if (pipe_.is_open()) read_more();
}

void HeartbeatChannel::close() {
  beat_ = nullptr;  // a read that completed before the close must not reach the owner
  boost::system::error_code ignored;
  pipe_.close(ignored);
}

void HeartbeatChannel::read_more() {
  pipe_.async_read_some(
      boost::asio::buffer(buffer_),
      [self = shared_from_this()](const boost::system::error_code& error, size_t size) {
        if (size > 0 && self->beat_) {
          self->beat_(self->lines_.feed(std::string_view(self->buffer_, size)));
        }
        if (!error) self->read_more();
      });
}

}  // namespace cohort
