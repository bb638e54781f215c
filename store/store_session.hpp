// One client connection of the worker store: reads what the client sent, decodes requests with
// its TcpStoreDecoder, passes them to the service, and writes replies in order. Any decode or
// store error closes this connection only. Reads and writes go through its thread's EpollLoop
// (which reads into a buffer of its own: an idle connection holds none), and through its
// UringLoop once busy (a recv into a small buffer of the session's waits in the ring). Owned by
// StoreService's registry and by its own ops in flight. Runs on its io_context's thread; queue(),
// write_queued() and close_on_its_thread() may be called from any thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/epoll_loop.hpp"
#include "common/uring_loop.hpp"
#include "store/store.hpp"
#include "store/tcpstore_codec.hpp"
#include "store/tcpstore_limits.hpp"

namespace cohort {

class StoreService;

class StoreSession : public std::enable_shared_from_this<StoreSession> {
 public:
  /// Unsent reply bytes above which the session stops decoding and reading until the client
  /// catches up.
  static constexpr size_t kMaxUnsentBytes = kStoreMaxUnsentBytes;
  /// Unsent reply bytes that never count against the quota: those below the pause, and one reply
  /// too small for Store::check_reply to check.
  static constexpr size_t kUnchargedUnsentBytes = kMaxUnsentBytes + kStoreUnchargedReplyBytes;

  /// Bytes of the buffer a ring recv fills; a full one is followed by a plain read of the rest.
  static constexpr size_t kRingReadBytes = 1024;

  /// `descriptor`: the connected, non-blocking socket, now the session's. `executor`: of the
  /// io_context that serves it; `epoll` and `ring` are that context's loops. The ring does the
  /// reads and writes from the start (`ring_after` 0) or once the connection has made
  /// `ring_after` requests through `epoll` and another busy one shares the thread; without a
  /// ring, `epoll` for good.
  StoreSession(std::shared_ptr<StoreService> service, int descriptor, EpollLoop& epoll,
               UringLoop* ring, uint32_t ring_after,
               boost::asio::io_context::executor_type executor, StoreConnectionId id,
               StoreNumbering legacy_numbering);
  ~StoreSession();
  StoreSession(const StoreSession&) = delete;
  StoreSession& operator=(const StoreSession&) = delete;

  /// Starts reading, on the socket's thread.
  void start();
  StoreConnectionId id() const { return id_; }
  boost::asio::io_context::executor_type executor() const { return executor_; }
  /// Any thread (the service calls it under its lock, which orders the replies): appends reply
  /// bytes; they are written by the end of this session's read batch or by write_queued().
  void queue(std::string_view bytes);
  /// Any thread: writes what queue() added, at once on the session's own thread, otherwise soon
  /// on it.
  void write_queued();
  /// Closes the socket and leaves the service. Idempotent. The session's thread.
  void close(std::string_view reason);
  /// close(), from any thread: at once on the session's own thread, otherwise soon on it.
  void close_on_its_thread(std::string reason);
  /// close() for a client's fault (a malformed request, a limit): logs a warning naming the peer.
  void refuse(std::string_view reason);
  /// Any thread: reply bytes queued or being written, not yet sent.
  size_t unsent();
  /// The session's thread: of `unsent_bytes`, what the store has not yet been charged; counted
  /// as charged from now on (the caller charges it).
  uint64_t more_to_hold(size_t unsent_bytes);

 private:
  void wait_readable();
  static void on_received(void* self, int result);
  static void on_sent(void* self, int result);
  void read_ready();
  void after_input();
  size_t read_some(char* buffer, size_t size, boost::system::error_code& error);
  void send_in_flight();
  void close_descriptor();
  void use_ring();
  /// Through epoll for now, to the ring once busy.
  bool bound_for_ring() const { return ring_ != nullptr && loop_ != ring_; }
  void move_to_ring();
  void release_descriptor_when_idle();
  std::string peer_text();
  bool on_its_thread() const { return executor_.running_in_this_thread(); }
  /// Moves what queue() added behind outbox_.
  void take_queued();
  void consume(std::string_view bytes);
  void flush();
  void on_written(const boost::system::error_code& error);
  void resume_reading_if_drained();
  bool drain_stash();
  std::string charge_declared(uint64_t declared_bytes);
  void release_charge();
  void hold_unsent(size_t unsent_bytes);
  void release_sent();

  std::shared_ptr<StoreService> service_;
  SocketLoop* loop_;  ///< reads and writes go through it: the epoll loop, or ring_
  UringLoop* ring_;   ///< the thread's ring (nullptr: none), used after ring_after_ requests
  uint32_t ring_after_;
  uint32_t requests_ = 0;           ///< made through epoll, counted while bound_for_ring()
  bool counted_busy_ = false;       ///< in the busy connections of its ring
  bool move_when_written_ = false;  ///< to the ring once the send in flight ends
  int descriptor_;
  boost::asio::io_context::executor_type executor_;
  SocketOp receive_op_;
  SocketOp send_op_;
  std::unique_ptr<char[]> ring_buffer_;  ///< what the ring's recv fills (ring only)
  size_t in_flight_sent_ = 0;            ///< of in_flight_, sent so far
  TcpStoreDecoder decoder_;
  std::string outbox_;     ///< replies not yet given to the socket
  std::string in_flight_;  ///< the bytes of the send in flight
  std::string stash_;      ///< input not decoded yet while replies drain (usually empty)
  std::mutex queued_mutex_;
  std::string queued_;         ///< replies queued but not yet in outbox_ (queued_mutex_)
  bool write_posted_ = false;  ///< a write_queued() is on its way to this thread (queued_mutex_)
  StoreConnectionId id_;
  uint64_t charged_ = 0;  ///< what the request still arriving has charged against the quota
  uint64_t held_ = 0;     ///< what its unsent replies count against the quota
  bool batching_ = false;
  bool writing_ = false;
  bool read_paused_ = false;
  bool closed_ = false;
};

}  // namespace cohort
