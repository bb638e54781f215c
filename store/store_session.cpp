#include "store/store_session.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <vector>

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

StoreSession::StoreSession(std::shared_ptr<StoreService> service, asio::ip::tcp::socket socket,
                           asio::io_context::executor_type executor, StoreConnectionId id,
                           StoreNumbering legacy_numbering)
    : service_(std::move(service)),
      socket_(std::move(socket)),
      executor_(executor),
      decoder_(legacy_numbering),
      id_(id) {
  decoder_.check_declared([this](uint64_t declared) { return charge_declared(declared); });
}

// What a request declares past kStoreUnchargedRequestBytes counts against the store's quota
// before its bytes are read (they come only as the client sends them, but a client that stops
// halfway would otherwise hold them for as long as it likes).
std::string StoreSession::charge_declared(uint64_t declared_bytes) {
  uint64_t due = declared_bytes > kStoreUnchargedRequestBytes
                     ? declared_bytes - kStoreUnchargedRequestBytes
                     : 0;
  if (due <= charged_) return {};
  std::string refused = service_->charge_unfinished(due - charged_);
  if (refused.empty()) charged_ = due;
  return refused;
}

void StoreSession::release_charge() {
  service_->release_unfinished(charged_);
  charged_ = 0;
}

void StoreSession::start() {
  asio::dispatch(executor_, [self = shared_from_this()] { self->wait_readable(); });
}

// Waits for readability instead of reading into a per-connection buffer: an idle connection
// holds no read buffer at all.
void StoreSession::wait_readable() {
  socket_.async_wait(
      asio::ip::tcp::socket::wait_read,
      [self = shared_from_this()](const error_code& error) { self->on_readable(error); });
}

void StoreSession::on_readable(const error_code& error) {
  if (closed_) return;
  if (error) {
    close(error.message());
    return;
  }
  char* buffer = thread_read_buffer();
  error_code read_error;
  size_t size = socket_.read_some(asio::buffer(buffer, kReadBufferBytes), read_error);
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
  if (!drain_stash()) {
    read_paused_ = true;  // the client does not read its replies; on_written resumes
    return;
  }
  wait_readable();
}

// Decodes and applies requests. Past kMaxUnsentBytes of unsent replies the rest of the input
// waits in stash_ (the read buffer is shared), so a client that pipelines requests for large
// values without reading the replies costs a bounded amount of memory.
void StoreSession::consume(std::string_view bytes) {
  auto self = shared_from_this();
  batching_ = true;
  while (!closed_ && !bytes.empty()) {
    if (unsent() > kMaxUnsentBytes) {
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
  }
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

// Writes what it can right away (the common case: a few bytes into an empty socket buffer) and
// leaves the rest to one async write at a time, which keeps replies in order.
void StoreSession::flush() {
  if (closed_ || writing_) return;
  take_queued();
  if (outbox_.empty()) return;
  error_code error;
  size_t written = socket_.write_some(asio::buffer(outbox_), error);
  if (would_block(error)) {
    written = 0;
    error.clear();
  }
  if (error) {
    close(error.message());
    return;
  }
  if (written == outbox_.size()) {
    release_if_large(outbox_);
    return;
  }
  outbox_.erase(0, written);
  std::swap(in_flight_, outbox_);
  writing_ = true;
  asio::async_write(
      socket_, asio::buffer(in_flight_),
      [self = shared_from_this()](const error_code& error, size_t) { self->on_written(error); });
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
  error_code error;
  auto peer = socket_.remote_endpoint(error);
  log::warn("store: closing the connection from ",
            error ? std::string("an unknown peer") : peer.address().to_string(), " port ",
            error ? 0 : peer.port(), ": ", reason);
  close(reason);
}

void StoreSession::close_on_its_thread(std::string reason) {
  asio::dispatch(executor_,
                 [self = shared_from_this(), reason = std::move(reason)] { self->close(reason); });
}

void StoreSession::close(std::string_view reason) {
  if (closed_) return;
  auto self = shared_from_this();  // the registry may hold the last reference
  closed_ = true;
  error_code ignored;
  if (!writing_) take_queued();
  if (!writing_ && !outbox_.empty()) {  // best effort: replies to the requests before the error
    socket_.write_some(asio::buffer(outbox_), ignored);
  }
  socket_.close(ignored);
  release_if_large(outbox_);
  {
    std::lock_guard lock(queued_mutex_);
    std::string().swap(queued_);
  }
  std::string().swap(stash_);
  release_charge();
  log::debug("store: connection ", id_, " closed: ", reason);
  service_->forget(id_);
}

}  // namespace cohort
