// The io threads a server spreads its connections over: the host's own io_context (run by the
// host's thread) and `threads - 1` more, each run by a thread of its own. A server listens on
// each context (a store: one listener per context, on one port) and serves each connection on
// the context that accepted it. Created by the host (cohortd's main, a test) before every server
// that uses it and destroyed after them: the destructor stops the extra contexts and joins their
// threads. Each context gets an EpollLoop, through which its store connections read and write,
// and with SocketIo::IoUring or Auto a UringLoop too, where the kernel allows, to which busy ones
// move. context(), size(), epoll_of() and ring_of() from any thread.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace cohort {

class EpollLoop;
class UringLoop;

/// How a pool's connections read and write: epoll readiness and a system call per read and write
/// (EpollLoop), or batched through an io_uring per thread (UringLoop); Auto: io_uring where the
/// kernel allows it, else epoll.
enum class SocketIo { Epoll, IoUring, Auto };

class IoPool {
 public:
  /// The most threads --threads accepts.
  static constexpr int kMaxThreads = 64;
  /// The default: one per core, at most 16.
  static int default_threads();

  /// `home` is the host's io_context, which the host runs itself. threads >= 1.
  IoPool(boost::asio::io_context& home, int threads, SocketIo io = SocketIo::Epoll);
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  /// The pool's contexts: 0 is home, then each extra one.
  boost::asio::io_context& context(size_t index) { return index == 0 ? home_ : *extra_[index - 1]; }
  size_t size() const { return extra_.size() + 1; }
  /// With io_uring: the requests a connection makes through epoll before it counts as busy; it
  /// moves to its thread's ring once another busy connection shares that thread. Short-lived
  /// connections (a rank's bootstrap: connect, a few requests, close) and a lone busy one cost less
  /// through epoll; busy ones side by side much less through the ring. 0: every connection starts
  /// on the ring.
  static constexpr uint32_t kRingAfterRequests = 32;
  void set_ring_after(uint32_t requests) { ring_after_ = requests; }
  uint32_t ring_after() const { return ring_after_; }
  /// The epoll loop of one of the pool's contexts.
  EpollLoop& epoll_of(const boost::asio::io_context& context) const;
  /// The io_uring loop of one of the pool's contexts; nullptr where the pool uses epoll.
  UringLoop* ring_of(const boost::asio::io_context& context) const;
  bool uses_io_uring() const { return !rings_.empty(); }
  /// Why io_uring was asked for and is not used ("" if it is, or was not asked for).
  const std::string& io_uring_unavailable() const { return io_uring_unavailable_; }

 private:
  void open_rings();

  using WorkGuard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;

  boost::asio::io_context& home_;
  std::vector<std::unique_ptr<boost::asio::io_context>> extra_;
  std::vector<WorkGuard> guards_;
  std::vector<std::thread> threads_;
  std::vector<EpollLoop*> epolls_;  ///< home's, then each extra context's
  std::vector<UringLoop*> rings_;   ///< home's, then each extra context's; empty with epoll
  std::string io_uring_unavailable_;
  uint32_t ring_after_ = kRingAfterRequests;
};

}  // namespace cohort
