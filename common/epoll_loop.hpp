// Socket reads and writes through an epoll set of the loop's own, for the connections one
// io_context serves without io_uring: each descriptor is registered once, edge-triggered, so a
// request costs a recv and a send and nothing more (Asio's reactor re-arms a descriptor with
// epoll_ctl for every wait). Recvs and sends started by a batch of handlers are tried after it; the
// set's own descriptor is watched by the io_context's reactor. An Asio service of its io_context,
// made by EpollLoop::of() and used only on the thread that runs that context.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/socket_loop.hpp"

namespace cohort {

class EpollLoop : public boost::asio::execution_context::service, public SocketLoop {
 public:
  using key_type = EpollLoop;
  static inline boost::asio::execution_context::id id;

  /// Bytes a recv without a buffer of its own may read at once.
  static constexpr size_t kReadBytes = 64 * 1024;

  /// The loop of `context`, made on the first call; throws boost::system::system_error where no
  /// epoll set can be made (as Asio's own reactor does). Any thread, before the context runs its
  /// first op through the loop.
  static EpollLoop& of(boost::asio::io_context& context);

  explicit EpollLoop(boost::asio::execution_context& context);
  ~EpollLoop() override;
  EpollLoop(const EpollLoop&) = delete;
  EpollLoop& operator=(const EpollLoop&) = delete;

  void release(int descriptor, bool closing) override;
  uint64_t started() const override { return started_.load(std::memory_order_relaxed); }

 private:
  /// What the loop knows of one descriptor: its ops waiting, and whether a recv or a send might
  /// go through now (set by an event, cleared by EAGAIN or a short read).
  struct Watch {
    SocketOp* receive = nullptr;
    SocketOp* send = nullptr;
    int error = 0;  ///< registering it failed: its ops end with -error
    bool registered = false;
    bool readable = true;
    bool writable = true;
    bool hung_up = false;  ///< the peer ended its side (or the socket failed): always readable
    bool queued = false;   ///< in ready_
  };

  void shutdown() override;
  void start(SocketOp& op, std::shared_ptr<void> hold) override;
  Watch& watch(int descriptor);
  void try_soon(int descriptor);
  void run_soon();
  void try_ready();
  void perform(int descriptor);
  bool perform_send(int descriptor);
  bool perform_receive(int descriptor);
  void complete(SocketOp& op, int result);
  void wait_for_events();
  void on_events(const boost::system::error_code& error);

  boost::asio::io_context& context_;
  int epoll_ = -1;
  boost::asio::posix::stream_descriptor epoll_descriptor_;
  std::vector<Watch> watches_;  ///< by descriptor
  std::vector<int> ready_;      ///< descriptors whose ops are to be tried, in order
  std::vector<int> trying_;     ///< the batch of ready_ being tried
  std::vector<epoll_event> events_;
  std::unique_ptr<char[]> read_buffer_;
  size_t pending_ = 0;            ///< ops in flight
  bool run_posted_ = false;       ///< a try_ready() is deferred
  bool handling_events_ = false;  ///< inside on_events: its end tries what is queued
  bool waiting_ = false;          ///< an async_wait on the set's descriptor is pending
  bool shut_down_ = false;
  std::atomic<uint64_t> started_{0};
};

}  // namespace cohort
