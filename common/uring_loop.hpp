// Socket reads and writes through an io_uring, for the connections one io_context serves: each
// recv and send is a submission entry, all the entries a batch of handlers queued go to the kernel
// in one io_uring_enter, and the completions come back through the ring's descriptor, which the
// io_context's reactor watches. A request costs no system call of its own (through EpollLoop
// it costs a recv and a send). An Asio service of its io_context, so one per context,
// made by UringLoop::open() and used only on the thread that runs that context.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/socket_loop.hpp"

struct io_uring;
struct io_uring_sqe;

namespace cohort {

class UringLoop : public boost::asio::execution_context::service, public SocketLoop {
 public:
  using key_type = UringLoop;
  static inline boost::asio::execution_context::id id;

  /// The loop of `context`, made on the first call: nullptr (and `why` says why) where this kernel
  /// or its sandbox gives no io_uring with what the loop needs. Any thread, before the context
  /// runs its first op through the loop.
  static UringLoop* open(boost::asio::io_context& context, std::string* why = nullptr);

  explicit UringLoop(boost::asio::execution_context& context);
  ~UringLoop() override;
  UringLoop(const UringLoop&) = delete;
  UringLoop& operator=(const UringLoop&) = delete;

  bool usable() const { return ring_ready_; }
  /// The context's thread: connections busy enough to batch (their owners count them in and out).
  /// One alone gains nothing from the ring: each of its requests is a sleep and a wake-up.
  void count_busy(int change) { busy_connections_ += change; }
  int busy_connections() const { return busy_connections_; }
  uint64_t started() const override { return started_.load(std::memory_order_relaxed); }
  const std::string& unusable_reason() const { return unusable_reason_; }

  /// receive()'s buffer must not be nullptr: the ring reads into the op's own buffer.
  /// Nothing to forget: a descriptor is named only by its ops.
  void release(int, bool) override {}

 private:
  void shutdown() override;
  void start_ring();
  void start(SocketOp& op, std::shared_ptr<void> hold) override;
  io_uring_sqe* free_entry();
  void prepare(io_uring_sqe* entry, SocketOp& op);
  void prepare_waiting();
  void untrack(SocketOp& op);
  void submit_soon();
  void submit();
  void wait_for_completions();
  void on_completions(const boost::system::error_code& error);
  void reap();

  boost::asio::io_context& context_;
  std::unique_ptr<io_uring> ring_;
  bool ring_ready_ = false;
  std::string unusable_reason_;
  boost::asio::posix::stream_descriptor ring_descriptor_;
  SocketOp* in_flight_ = nullptr;      ///< head of the list
  SocketOp* waiting_first_ = nullptr;  ///< ops for which the queue had no entry, in order
  SocketOp* waiting_last_ = nullptr;
  bool reaping_ = false;        ///< inside on_completions: its end submits
  bool submit_posted_ = false;  ///< a submit() is queued on the context
  bool waiting_ = false;        ///< an async_wait on the ring's descriptor is pending
  bool shut_down_ = false;
  int busy_connections_ = 0;
  std::atomic<uint64_t> started_{0};
};

}  // namespace cohort
