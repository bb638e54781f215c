#include "common/io_pool.hpp"

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>

#include "common/epoll_loop.hpp"
#include "common/signal_blocking.hpp"
#include "common/uring_loop.hpp"

namespace cohort {

int IoPool::default_threads() {
  unsigned cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(cores, 1u, 16u));
}

IoPool::IoPool(boost::asio::io_context& home, int threads, SocketIo io) : home_(home) {
  for (int i = 1; i < threads; ++i) {
    extra_.push_back(std::make_unique<boost::asio::io_context>(1));
    guards_.push_back(boost::asio::make_work_guard(*extra_.back()));
    // A context makes its reactor (an epoll and an eventfd descriptor) for its first socket,
    // which may come when descriptors have run out, and would throw then: make it now.
    boost::asio::ip::tcp::socket unopened(*extra_.back());
  }
  epolls_.push_back(&EpollLoop::of(home_));  // made now, for the same reason
  for (auto& context : extra_) epolls_.push_back(&EpollLoop::of(*context));
  if (io != SocketIo::Epoll) open_rings();
  SignalsBlocked for_the_threads;  // the process takes its signals on the home thread
  for (auto& context : extra_) {
    threads_.emplace_back([io = context.get()] { io->run(); });
  }
}

// Every context gets its loop before its thread starts, or none does (then all use epoll).
void IoPool::open_rings() {
  std::vector<boost::asio::io_context*> contexts{&home_};
  for (auto& context : extra_) contexts.push_back(context.get());
  for (auto* context : contexts) {
    UringLoop* ring = UringLoop::open(*context, &io_uring_unavailable_);
    if (ring == nullptr) {
      rings_.clear();
      return;
    }
    rings_.push_back(ring);
  }
}

EpollLoop& IoPool::epoll_of(const boost::asio::io_context& context) const {
  for (size_t i = 0; i < extra_.size(); ++i) {
    if (extra_[i].get() == &context) return *epolls_[i + 1];
  }
  return *epolls_[0];
}

UringLoop* IoPool::ring_of(const boost::asio::io_context& context) const {
  if (rings_.empty()) return nullptr;
  if (&context == &home_) return rings_[0];
  for (size_t i = 0; i < extra_.size(); ++i) {
    if (extra_[i].get() == &context) return rings_[i + 1];
  }
  return nullptr;
}

// The threads stop once their contexts run dry or are stopped; what is left in a context (the
// handlers of connections still open) is destroyed with it, after every thread has joined.
IoPool::~IoPool() {
  guards_.clear();
  for (auto& context : extra_) context->stop();
  for (auto& thread : threads_) thread.join();
  extra_.clear();
}

}  // namespace cohort
