#include "store/store_session.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

#include "common/log.hpp"
#include "store/store_service.hpp"
#include "store/tcpstore_limits.hpp"

namespace cohort {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

// Output buffers keep at most this much capacity between bursts (idle memory stays small).
constexpr size_t kKeptBufferBytes = 1024;
constexpr size_t kReadBufferBytes = 64 * 1024;

// One read buffer per thread, shared by the sessions it serves: a read is consumed before the
// thread reads again.
char* thread_read_buffer() {
  thread_local std::vector<char> buffer(kReadBufferBytes);
  return buffer.data();
}

void release_if_large(std::string& buffer) {
  buffer.clear();
  if (buffer.capacity() > kKeptBufferBytes) std::string().swap(buffer);
}

bool would_block(const error_code& error) {
  return error == asio::error::would_block || error == asio::error::try_again;
}

}  // namespace

StoreSession::StoreSession(std::shared_ptr<StoreService> service, int descriptor, EpollLoop& epoll,
                           UringLoop* ring, uint32_t ring_after,
                           asio::io_context::executor_type executor, StoreConnectionId id,
                           StoreNumbering legacy_numbering)
    : service_(std::move(service)),
      loop_(&epoll),
      ring_(ring),
      ring_after_(ring_after),
      descriptor_(descriptor),
      executor_(executor),
      decoder_(legacy_numbering),
      id_(id) {
  decoder_.check_declared([this](uint64_t declared) { return charge_declared(declared); });
  receive_op_.complete = &StoreSession::on_received;
  receive_op_.owner = this;
  send_op_.complete = &StoreSession::on_sent;
  send_op_.owner = this;
  if (ring_ != nullptr && ring_after_ == 0) use_ring();
}

// The ring's recvs fill a small buffer of the session's, which outlives the call (the epoll loop
// lends its own to the completion).
void StoreSession::use_ring() {
  loop_ = ring_;
  ring_buffer_ = std::make_unique<char[]>(kRingReadBytes);
}

// Between reads, with nothing in flight on the socket, once it and another connection of its
// thread are busy: takes the descriptor out of the epoll set and hands it to the ring.
void StoreSession::move_to_ring() {
  loop_->release(descriptor_, false);
  use_ring();
}

// Only a session that never started, or whose loop was shut down with the io_context, still has
// its descriptor here.
StoreSession::~StoreSession() {
  if (descriptor_ < 0) return;
  loop_->release(descriptor_, true);
  ::close(descriptor_);
}

// What a request declares past kStoreUnchargedRequestBytes counts against the store's quota
// before its bytes are read (they come only as the client sends them, but a client that stops
// halfway would otherwise hold them for as long as it likes).
std::string StoreSession::charge_declared(uint64_t declared_bytes) {
  uint64_t due = declared_bytes > kStoreUnchargedRequestBytes
                     ? declared_bytes - kStoreUnchargedRequestBytes
                     : 0;
  if (due <= charged_) return {};
  std::string refused = service_->charge_held(due - charged_);
  if (refused.empty()) charged_ = due;
  return refused;
}

void StoreSession::release_charge() {
  service_->release_held(charged_);
  charged_ = 0;
}

// Unsent replies past kUnchargedUnsentBytes count against the store's quota until they are sent:
// a client that asks for large values and never reads them would otherwise hold them for as long
// as it likes, on every connection it opens. Only a reply that Store::check_reply found room for
// takes a connection there (the session applies nothing past kMaxUnsentBytes), and
// StoreService::dispatch charges it before the store's lock is let go, so this never takes the
// store past its quota. Returns the bytes to hold more.
uint64_t StoreSession::more_to_hold(size_t unsent_bytes) {
  uint64_t due = unsent_bytes > kUnchargedUnsentBytes ? unsent_bytes - kUnchargedUnsentBytes : 0;
  if (due <= held_) return 0;
  uint64_t more = due - held_;
  held_ = due;
  return more;
}

void StoreSession::hold_unsent(size_t unsent_bytes) {
  if (uint64_t more = more_to_hold(unsent_bytes); more > 0) service_->hold(more);
}

void StoreSession::release_sent() {
  if (held_ == 0) return;
  size_t left = unsent();
  uint64_t due = left > kUnchargedUnsentBytes ? left - kUnchargedUnsentBytes : 0;
  if (due >= held_) return;
  service_->release_held(held_ - due);
  held_ = due;
}

void StoreSession::start() {
  asio::dispatch(executor_, [self = shared_from_this()] { self->wait_readable(); });
}

// A recv waits in the loop: into the session's small buffer with the ring, into the loop's own
// with epoll (an idle connection holds no read buffer there).
void StoreSession::wait_readable() {
  loop_->receive(receive_op_, shared_from_this(), descriptor_, ring_buffer_.get(),
                 ring_buffer_ != nullptr ? kRingReadBytes : 0);
}

// The recv ended: `result` bytes are in the op's buffer, or the stream ended (0, also after close()
// shut the connection down), or -errno.
void StoreSession::on_received(void* owner, int result) {
  auto& self = *static_cast<StoreSession*>(owner);
  if (self.closed_) {
    self.release_descriptor_when_idle();
    return;
  }
  if (result <= 0) {
    self.close(result == 0 ? "closed by the client" : std::strerror(-result));
    return;
  }
  self.consume(std::string_view(self.receive_op_.buffer, static_cast<size_t>(result)));
  if (self.closed_) return;
  // A full small buffer may have left more in the socket: one plain read takes up to 64 KiB of it.
  if (self.ring_buffer_ != nullptr && static_cast<size_t>(result) == kRingReadBytes &&
      self.stash_.empty()) {
    self.read_ready();
    return;
  }
  self.after_input();
}

// Reads what the socket holds (up to the thread's buffer), decodes it and waits for more.
void StoreSession::read_ready() {
  char* buffer = thread_read_buffer();
  error_code read_error;
  size_t size = read_some(buffer, kReadBufferBytes, read_error);
  if (would_block(read_error)) {
    wait_readable();
    return;
  }
  if (read_error) {
    close(read_error == asio::error::eof ? "closed by the client" : read_error.message());
    return;
  }
  consume(std::string_view(buffer, size));
  if (closed_) return;
  after_input();
}

void StoreSession::after_input() {
  if (!drain_stash()) {
    read_paused_ = true;  // the client does not read its replies; on_written resumes
    return;
  }
  if (bound_for_ring() && requests_ >= ring_after_) {
    if (!counted_busy_) {
      counted_busy_ = true;
      ring_->count_busy(1);
    }
    if (ring_->busy_connections() >= 2) {
      if (writing_) {  // the reply goes out first: on_written moves the connection, then reads
        move_when_written_ = true;
        return;
      }
      move_to_ring();
    }
  }
  wait_readable();
}

size_t StoreSession::read_some(char* buffer, size_t size, error_code& error) {
  ssize_t got = ::recv(descriptor_, buffer, size, MSG_DONTWAIT);
  if (got > 0) return static_cast<size_t>(got);
  if (got == 0) {
    error = asio::error::eof;
  } else {
    error.assign(errno, asio::error::get_system_category());
  }
  return 0;
}

// Decodes and applies requests. Past kMaxUnsentBytes of unsent replies the rest of the input
// waits in stash_ (the read buffer is shared) and reading stops, so a client that pipelines
// requests without reading the replies holds at most kMaxUnsentBytes and one reply, which counts
// against the quota (before its next request is applied) when large enough to have been checked.
void StoreSession::consume(std::string_view bytes) {
  auto self = shared_from_this();
  batching_ = true;
  while (!closed_ && !bytes.empty()) {
    size_t pending = unsent();
    hold_unsent(pending);
    if (pending > kMaxUnsentBytes) {
      stash_.assign(bytes);
      break;
    }
    DecodeStep step = decoder_.feed(bytes);
    bytes.remove_prefix(step.consumed);
    if (step.status == DecodeStatus::NeedMore) break;
    if (step.status == DecodeStatus::Error) {
      batching_ = false;
      refuse(decoder_.error());
      return;
    }
    release_charge();  // the store charges what the request stores, if it does
    service_->dispatch(*this, decoder_.request());
    decoder_.recycle_request();
    if (bound_for_ring()) ++requests_;
  }
  if (!closed_) hold_unsent(unsent());
  batching_ = false;
  flush();
}

void StoreSession::queue(std::string_view bytes) {
  std::lock_guard lock(queued_mutex_);
  queued_.append(bytes);
}

void StoreSession::write_queued() {
  if (on_its_thread()) {
    if (!batching_) flush();
    return;
  }
  {
    std::lock_guard lock(queued_mutex_);
    if (write_posted_) return;
    write_posted_ = true;
  }
  asio::post(executor_, [self = shared_from_this()] {
    {
      std::lock_guard lock(self->queued_mutex_);
      self->write_posted_ = false;
    }
    self->flush();
  });
}

void StoreSession::take_queued() {
  std::lock_guard lock(queued_mutex_);
  if (queued_.empty()) return;
  if (outbox_.empty()) {
    std::swap(outbox_, queued_);
  } else {
    outbox_.append(queued_);
    queued_.clear();
  }
}

size_t StoreSession::unsent() {
  std::lock_guard lock(queued_mutex_);
  return queued_.size() + outbox_.size() + in_flight_.size();
}

// Hands what is queued to the loop, one send at a time, which keeps replies in order: with
// epoll it goes out after the handlers at hand (the common case: a few bytes into an empty socket
// buffer), with the ring in their batch's one submission.
void StoreSession::flush() {
  if (closed_ || writing_) return;
  take_queued();
  if (outbox_.empty()) return;
  std::swap(in_flight_, outbox_);
  writing_ = true;
  in_flight_sent_ = 0;
  send_in_flight();
}

void StoreSession::send_in_flight() {
  loop_->send(send_op_, shared_from_this(), descriptor_, in_flight_.data() + in_flight_sent_,
              in_flight_.size() - in_flight_sent_);
}

// The send ended: `result` bytes went, or -errno.
void StoreSession::on_sent(void* owner, int result) {
  auto& self = *static_cast<StoreSession*>(owner);
  if (self.closed_) {
    self.writing_ = false;
    self.release_descriptor_when_idle();
    return;
  }
  if (result < 0) {
    self.on_written(error_code(-result, asio::error::get_system_category()));
    return;
  }
  self.in_flight_sent_ += static_cast<size_t>(result);
  if (self.in_flight_sent_ < self.in_flight_.size()) {
    self.send_in_flight();
    return;
  }
  self.on_written({});
}

void StoreSession::on_written(const error_code& error) {
  writing_ = false;
  if (closed_) return;
  if (error) {
    close(error.message());
    return;
  }
  release_if_large(in_flight_);
  flush();
  release_sent();
  if (move_when_written_ && !writing_) {
    move_when_written_ = false;
    move_to_ring();
    wait_readable();
    return;
  }
  resume_reading_if_drained();
}

void StoreSession::resume_reading_if_drained() {
  if (!read_paused_ || closed_ || !drain_stash()) return;
  read_paused_ = false;
  wait_readable();
}

// Decodes the stashed input while the unsent replies stay under the limit. True when reading
// may go on; false while replies must drain first (a write is then in flight: after consume(),
// unsent bytes always have one, so on_written comes back here).
bool StoreSession::drain_stash() {
  while (!stash_.empty() && !closed_ && unsent() <= kMaxUnsentBytes) {
    std::string input = std::move(stash_);
    stash_.clear();
    consume(input);
  }
  return !closed_ && stash_.empty() && unsent() <= kMaxUnsentBytes;
}

void StoreSession::refuse(std::string_view reason) {
  if (closed_) return;
  log::warn("store: closing the connection from ", peer_text(), ": ", reason);
  close(reason);
}

std::string StoreSession::peer_text() {
  asio::ip::tcp::endpoint peer;
  socklen_t size = static_cast<socklen_t>(peer.capacity());
  if (::getpeername(descriptor_, peer.data(), &size) != 0) return "an unknown peer port 0";
  peer.resize(size);
  return peer.address().to_string() + " port " + std::to_string(peer.port());
}

void StoreSession::close_on_its_thread(std::string reason) {
  asio::dispatch(executor_,
                 [self = shared_from_this(), reason = std::move(reason)] { self->close(reason); });
}

// With an op in flight, the connection is shut down at once: the peer sees it end (even if this
// thread stops now), and the recv or send ends by itself (end of stream, EPIPE). The descriptor
// is closed only once none of the session's ops names it: a ring entry not yet submitted would
// otherwise reach whatever connection is next given the same number. (Not a cancel by op: the
// op's address may belong to another session by the time the cancel reaches the kernel.)
void StoreSession::close_descriptor() {
  if (receive_op_.in_flight || send_op_.in_flight) ::shutdown(descriptor_, SHUT_RDWR);
  release_descriptor_when_idle();
}

void StoreSession::release_descriptor_when_idle() {
  if (descriptor_ < 0 || receive_op_.in_flight || send_op_.in_flight) return;
  loop_->release(descriptor_, true);
  ::close(descriptor_);
  descriptor_ = -1;
}

void StoreSession::close(std::string_view reason) {
  if (closed_) return;
  auto self = shared_from_this();  // the registry may hold the last reference
  closed_ = true;
  if (counted_busy_) ring_->count_busy(-1);
  if (!writing_) take_queued();
  if (!writing_ && !outbox_.empty()) {  // best effort: replies to the requests before the error
    ::send(descriptor_, outbox_.data(), outbox_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  close_descriptor();
  release_if_large(outbox_);
  {
    std::lock_guard lock(queued_mutex_);
    std::string().swap(queued_);
  }
  std::string().swap(stash_);
  release_charge();
  service_->release_held(held_);
  held_ = 0;
  log::debug("store: connection ", id_, " closed: ", reason);
  service_->forget(id_);
}

}  // namespace cohort
