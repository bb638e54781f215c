#include "common/epoll_loop.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/defer.hpp>
#include <boost/system/system_error.hpp>
#include <cerrno>

namespace cohort {
namespace {

constexpr int kEventsPerWait = 256;
// The table of descriptors grows by this many at a time (32 bytes each), up to the highest
// descriptor the loop has seen.
constexpr size_t kWatchesStep = 4096;
constexpr uint32_t kWatchedEvents = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;

bool would_block(int error) { return error == EAGAIN || error == EWOULDBLOCK; }

}  // namespace

EpollLoop& EpollLoop::of(boost::asio::io_context& context) {
  return boost::asio::use_service<EpollLoop>(context);
}

EpollLoop::EpollLoop(boost::asio::execution_context& context)
    : boost::asio::execution_context::service(context),
      context_(static_cast<boost::asio::io_context&>(context)),
      epoll_descriptor_(context_),
      events_(kEventsPerWait),
      read_buffer_(std::make_unique<char[]>(kReadBytes)) {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_ < 0) {
    throw boost::system::system_error(errno, boost::system::system_category(), "epoll_create1");
  }
  boost::system::error_code error;
  epoll_descriptor_.assign(epoll_, error);
  if (error) {
    ::close(epoll_);
    throw boost::system::system_error(error, "watching the epoll set");
  }
  ready_.reserve(64);
  trying_.reserve(64);
}

EpollLoop::~EpollLoop() {
  if (epoll_descriptor_.is_open()) epoll_descriptor_.release();
  if (epoll_ >= 0) ::close(epoll_);
}

// Parks the op with its descriptor (registered on its first op) and tries it after the handlers
// at hand if the descriptor might take it now; otherwise its next event does.
void EpollLoop::start(SocketOp& op, std::shared_ptr<void> hold) {
  started_.fetch_add(1, std::memory_order_relaxed);
  op.hold = std::move(hold);
  op.in_flight = true;
  ++pending_;
  int descriptor = op.descriptor;
  Watch& entry = watch(descriptor);
  if (!entry.registered && entry.error == 0) {
    epoll_event event{};
    event.events = kWatchedEvents;
    event.data.fd = descriptor;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, descriptor, &event) == 0) {
      entry.registered = true;
    } else {
      entry.error = errno;
    }
  }
  (op.is_send ? entry.send : entry.receive) = &op;
  bool may_go = entry.error != 0 || (op.is_send ? entry.writable : entry.readable);
  if (may_go) try_soon(descriptor);
  wait_for_events();
}

EpollLoop::Watch& EpollLoop::watch(int descriptor) {
  size_t index = static_cast<size_t>(descriptor);
  if (index >= watches_.size()) watches_.resize((index / kWatchesStep + 1) * kWatchesStep);
  return watches_[index];
}

void EpollLoop::try_soon(int descriptor) {
  Watch& entry = watches_[static_cast<size_t>(descriptor)];
  if (entry.queued) return;
  entry.queued = true;
  ready_.push_back(descriptor);
  run_soon();
}

// After the handlers at hand (deferred: a continuation of this thread's work, which wakes no
// reactor); inside on_events, at its end.
void EpollLoop::run_soon() {
  if (run_posted_ || handling_events_ || shut_down_) return;
  run_posted_ = true;
  boost::asio::defer(context_, [this] {
    run_posted_ = false;
    try_ready();
  });
}

// Tries the ops queued so far; what their completions queue waits for the next round, after the
// context's other handlers, so that a client that keeps the socket full cannot hold the thread.
void EpollLoop::try_ready() {
  if (shut_down_) return;
  trying_.swap(ready_);
  for (int descriptor : trying_) {
    watches_[static_cast<size_t>(descriptor)].queued = false;
    perform(descriptor);
  }
  trying_.clear();
  if (!ready_.empty()) run_soon();
  wait_for_events();
}

// The send first (a reply goes before more requests are read), then the recv. A completion may
// start more ops or release the descriptor, and watches_ may grow: looked up again each time.
void EpollLoop::perform(int descriptor) {
  while (perform_send(descriptor)) {
  }
  perform_receive(descriptor);
}

// True when the send ended and another one may have been started by its completion.
bool EpollLoop::perform_send(int descriptor) {
  Watch& entry = watches_[static_cast<size_t>(descriptor)];
  if (entry.send == nullptr || !(entry.writable || entry.error != 0)) return false;
  SocketOp& op = *entry.send;
  int result = -entry.error;
  if (entry.error == 0) {
    ssize_t sent = ::send(descriptor, op.buffer, op.size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0 && would_block(errno)) {
      entry.writable = false;  // the next EPOLLOUT edge tries again
      return false;
    }
    if (sent < 0 && errno == EINTR) {
      try_soon(descriptor);
      return false;
    }
    result = sent < 0 ? -errno : static_cast<int>(sent);
  }
  entry.send = nullptr;
  complete(op, result);
  return true;
}

bool EpollLoop::perform_receive(int descriptor) {
  Watch& entry = watches_[static_cast<size_t>(descriptor)];
  if (entry.receive == nullptr || !(entry.readable || entry.error != 0)) return false;
  SocketOp& op = *entry.receive;
  int result = -entry.error;
  if (entry.error == 0) {
    char* buffer = op.buffer != nullptr ? op.buffer : read_buffer_.get();
    size_t size = op.buffer != nullptr ? op.size : kReadBytes;
    ssize_t got = ::recv(descriptor, buffer, size, MSG_DONTWAIT);
    if (got < 0 && would_block(errno)) {
      entry.readable = false;  // the next EPOLLIN edge tries again
      return false;
    }
    if (got < 0 && errno == EINTR) {
      try_soon(descriptor);
      return false;
    }
    // A short read emptied the socket: whatever comes next raises an edge. Not the end of the
    // stream, if it came with the last bytes: its edge was that one, and the next recv sees it.
    if (got > 0 && static_cast<size_t>(got) < size && !entry.hung_up) entry.readable = false;
    op.buffer = buffer;
    result = got < 0 ? -errno : static_cast<int>(got);
  }
  entry.receive = nullptr;
  complete(op, result);
  return true;
}

void EpollLoop::complete(SocketOp& op, int result) {
  --pending_;
  op.in_flight = false;
  std::shared_ptr<void> hold = std::move(op.hold);  // the owner lives through its completion
  op.complete(op.owner, result);
}

// Closing the descriptor takes it out of the set (the session holds its only reference); one
// handed elsewhere leaves it here.
void EpollLoop::release(int descriptor, bool closing) {
  if (descriptor < 0 || static_cast<size_t>(descriptor) >= watches_.size()) return;
  Watch& entry = watches_[static_cast<size_t>(descriptor)];
  if (entry.registered && !closing && !shut_down_) {
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, descriptor, nullptr);
  }
  for (SocketOp* op : {entry.receive, entry.send}) {  // none, by contract; never left dangling
    if (op == nullptr) continue;
    --pending_;
    op->in_flight = false;
    op->hold.reset();
  }
  entry = Watch{};
}

void EpollLoop::wait_for_events() {
  if (waiting_ || pending_ == 0 || shut_down_) return;
  waiting_ = true;
  epoll_descriptor_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                               [this](const boost::system::error_code& error) {
                                 waiting_ = false;
                                 on_events(error);
                               });
}

// Takes what the set has ready (at most kEventsPerWait; the rest keeps the set readable, so the
// next wait returns at once) and performs the ops the events allow.
void EpollLoop::on_events(const boost::system::error_code& error) {
  if (error == boost::asio::error::operation_aborted || shut_down_) return;
  int count = ::epoll_wait(epoll_, events_.data(), kEventsPerWait, 0);
  handling_events_ = true;
  for (int i = 0; i < count; ++i) {
    const epoll_event& event = events_[static_cast<size_t>(i)];
    int descriptor = event.data.fd;
    if (static_cast<size_t>(descriptor) >= watches_.size()) continue;
    Watch& entry = watches_[static_cast<size_t>(descriptor)];
    if (!entry.registered) continue;  // released since
    if (event.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) entry.readable = true;
    if (event.events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) entry.hung_up = true;
    if (event.events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) entry.writable = true;
    perform(descriptor);
  }
  handling_events_ = false;
  if (!ready_.empty()) try_ready();  // the replies of this batch, at once
  wait_for_events();
}

// The io_context is being destroyed (its thread has stopped): drops the owners of the ops still
// waiting without calling them.
void EpollLoop::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  std::vector<std::shared_ptr<void>> owners;  // dropped once the loop holds no op of theirs
  for (Watch& entry : watches_) {
    for (SocketOp* op : {entry.receive, entry.send}) {
      if (op == nullptr) continue;
      op->in_flight = false;
      owners.push_back(std::move(op->hold));
    }
    entry.receive = entry.send = nullptr;
  }
  pending_ = 0;
  ready_.clear();
  owners.clear();
}

}  // namespace cohort
