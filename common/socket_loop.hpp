// What a store connection reads and writes through: a recv or a send started now whose result
// comes back later as a completion, on the thread of the io_context the loop belongs to. Two
// loops do it: EpollLoop (an epoll set of its own, every descriptor registered once) and
// UringLoop (an io_uring). One of each per io_context at most, each an Asio service of it, used
// only on that context's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace cohort {

/// One recv or send in flight: embedded in its owner, which sets `complete` and `owner` once. While
/// it is in flight, `hold` keeps the owner alive (the loop drops it after `complete` runs, or
/// without calling it when the io_context is destroyed first). The rest is the loop's.
struct SocketOp {
  using Completion = void (*)(void* owner, int result);
  Completion complete = nullptr;
  void* owner = nullptr;
  std::shared_ptr<void> hold;
  bool in_flight = false;
  bool is_send = false;
  int descriptor = -1;
  /// A recv's destination (nullptr: the loop reads into a buffer of its own and points this at
  /// it for the completion, which must take what it needs before it returns); a send's bytes.
  char* buffer = nullptr;
  size_t size = 0;
  SocketOp* previous = nullptr;  ///< the loop's list of ops in flight
  SocketOp* next = nullptr;
  SocketOp* next_waiting = nullptr;  ///< the loop's list of ops waiting for their turn
};

class SocketLoop {
 public:
  virtual ~SocketLoop() = default;

  /// A recv of at most `size` bytes into `buffer` (valid until the completion; nullptr: see
  /// SocketOp::buffer), whose result is a byte count, 0 at end of stream, or -errno.
  void receive(SocketOp& op, std::shared_ptr<void> hold, int descriptor, char* buffer,
               size_t size) {
    op.is_send = false;
    op.descriptor = descriptor;
    op.buffer = buffer;
    op.size = size;
    start(op, std::move(hold));
  }
  /// A send of `size` bytes (valid until the completion); the result as above.
  void send(SocketOp& op, std::shared_ptr<void> hold, int descriptor, const char* bytes,
            size_t size) {
    op.is_send = true;
    op.descriptor = descriptor;
    op.buffer = const_cast<char*>(bytes);  // only read
    op.size = size;
    start(op, std::move(hold));
  }
  /// The descriptor is about to be closed (`closing`) or handed elsewhere, with none of its ops in
  /// flight: the loop forgets it.
  virtual void release(int descriptor, bool closing) = 0;
  /// Recvs and sends started so far (any thread).
  virtual uint64_t started() const = 0;

 protected:
  /// Puts `op`, its fields set, in flight.
  virtual void start(SocketOp& op, std::shared_ptr<void> hold) = 0;
};

}  // namespace cohort
