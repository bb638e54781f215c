#include "common/io_pool.hpp"

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>

namespace cohort {

int IoPool::default_threads() {
  unsigned cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(cores, 1u, 16u));
}

IoPool::IoPool(boost::asio::io_context& home, int threads) : home_(home) {
  for (int i = 1; i < threads; ++i) {
    extra_.push_back(std::make_unique<boost::asio::io_context>(1));
    guards_.push_back(boost::asio::make_work_guard(*extra_.back()));
    // A context makes its reactor (an epoll and an eventfd descriptor) for its first socket,
    // which may come when descriptors have run out, and would throw then: make it now.
    boost::asio::ip::tcp::socket unopened(*extra_.back());
  }
  for (auto& context : extra_) {
    threads_.emplace_back([io = context.get()] { io->run(); });
  }
}

// The threads stop once their contexts run dry or are stopped; what is left in a context (the
// handlers of connections still open) is destroyed with it, after every thread has joined.
IoPool::~IoPool() {
  guards_.clear();
  for (auto& context : extra_) context->stop();
  for (auto& thread : threads_) thread.join();
  extra_.clear();
}

boost::asio::io_context& IoPool::next() {
  size_t turn = next_.fetch_add(1, std::memory_order_relaxed) % size();
  return turn == 0 ? home_ : *extra_[turn - 1];
}

}  // namespace cohort
