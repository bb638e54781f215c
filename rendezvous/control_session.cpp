#include "rendezvous/control_session.hpp"

#include <boost/asio/write.hpp>

#include <sys/socket.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cohort {

ControlSession::ControlSession(boost::asio::ip::tcp::socket socket, MessageHandler on_message,
                               CloseHandler on_close)
    : socket_(std::move(socket)),
      close_deadline_(socket_.get_executor()),
      on_message_(std::move(on_message)),
      on_close_(std::move(on_close)) {
  boost::system::error_code ignored;
  socket_.set_option(boost::asio::ip::tcp::no_delay(true), ignored);
}

void ControlSession::start() {
  if (watching_) {
    watching_ = false;
    boost::system::error_code ignored;
    socket_.cancel(ignored);  // nothing else is pending before start()
  }
  read_more();
}

void ControlSession::watch_unstarted(std::function<void(const std::string& why)> gone) {
  watching_ = true;
  socket_.async_wait(
      boost::asio::ip::tcp::socket::wait_read,
      [self = shared_from_this(), gone = std::move(gone)](const boost::system::error_code& error) {
        if (error || !self->open_ || !self->watching_) return;
        self->watching_ = false;
        char peeked[64];
        ssize_t size =
            ::recv(self->socket_.native_handle(), peeked, sizeof peeked, MSG_PEEK | MSG_DONTWAIT);
        if (size == 0) return gone("closed by the peer before its turn");
        if (size < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return self->watch_unstarted(gone);
          return gone(std::string("before its turn: ") + std::strerror(errno));
        }
        std::string_view said(peeked, static_cast<size_t>(size));
        std::string_view leading = self->leading_;
        if (said.substr(0, leading.size()) == leading.substr(0, said.size()) && !leading.empty())
          return;  // the client's probe: it waits for us, rightly; read past it once started
        self->first_bytes_ = std::string(said.substr(0, 16));  // who it may be, for the log
        gone("it spoke before its challenge");
      });
}

void ControlSession::when_readable(std::function<void()> ready) {
  boost::system::error_code ignored;
  if (watching_) {
    watching_ = false;
    socket_.cancel(ignored);  // the watch ends; this wait takes over
  }
  socket_.async_wait(boost::asio::ip::tcp::socket::wait_read,
                     [self = shared_from_this(),
                      ready = std::move(ready)](const boost::system::error_code& error) {
                       if (!error && self->open_) ready();
                     });
}

std::string ControlSession::peek(size_t max) {
  std::string peeked(max, '\0');
  ssize_t size = ::recv(socket_.native_handle(), peeked.data(), max, MSG_PEEK | MSG_DONTWAIT);
  peeked.resize(size > 0 ? static_cast<size_t>(size) : 0);
  if (first_bytes_.empty()) first_bytes_ = peeked.substr(0, 16);
  return peeked;
}

boost::asio::ip::tcp::socket ControlSession::hand_over(const std::string& reason) {
  handed_over_ = true;
  boost::asio::ip::tcp::socket taken = std::move(socket_);
  finish(reason);  // on a socket moved from: closes nothing
  return taken;
}

std::string ControlSession::local_address() const {
  boost::system::error_code error;
  auto endpoint = socket_.local_endpoint(error);
  if (error) return {};
  auto address = endpoint.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return address.to_v6().to_v4().to_string();
  }
  return address.to_string();
}

std::string ControlSession::remote_address() const {
  boost::system::error_code error;
  auto endpoint = socket_.remote_endpoint(error);
  return error ? std::string() : endpoint.address().to_string();
}

void ControlSession::read_more() {
  socket_.async_read_some(boost::asio::buffer(buffer_),
                          [self = shared_from_this()](const boost::system::error_code& error,
                                                      size_t size) { self->on_read(error, size); });
}

void ControlSession::on_read(const boost::system::error_code& error, size_t size) {
  if (!open_ || closing_) return;
  if (error)
    return finish(error == boost::asio::error::eof ? "connection closed by peer" : error.message());
  if (first_bytes_.size() < 16) {
    first_bytes_.append(buffer_, std::min(size, 16 - first_bytes_.size()));
  }
  feed(buffer_, size);
  std::string payload;
  for (;;) {
    auto status = decoder_.next(payload);
    if (status == proto::FrameDecoder::Status::NeedMore) break;
    if (status == proto::FrameDecoder::Status::Error) {
      peer_broke_protocol_ = true;
      return close_after(proto::Error{"frame larger than the protocol's limit"}, "oversized frame");
    }
    std::string problem;
    std::optional<proto::ControlMessage> message = proto::decode_message(payload, problem);
    if (!message) {
      peer_broke_protocol_ = true;
      return close_after(proto::Error{problem}, "malformed frame: " + problem);
    }
    on_message_(*this, std::move(*message));
    if (!open_ || closing_) return;
  }
  read_more();
}

// Reads past the bytes skip_leading() named when the connection begins with them; a start that
// differs is decoded whole, what matched so far included.
void ControlSession::feed(const char* data, size_t size) {
  if (leading_matched_ < leading_.size()) {
    size_t n = std::min(size, leading_.size() - leading_matched_);
    if (leading_.substr(leading_matched_, n) == std::string_view(data, n)) {
      leading_matched_ += n;
      data += n;
      size -= n;
    } else {
      decoder_.feed(leading_.data(), leading_matched_);
      leading_ = {};
      leading_matched_ = 0;
    }
  }
  decoder_.feed(data, size);
}

void ControlSession::send(const proto::ControlMessage& message) {
  send_bytes(proto::encode_frame(proto::encode_message(message)));
}

void ControlSession::send_bytes(const std::string& bytes) {
  if (!open_ || closing_) return;
  outbox_ += bytes;
  // A peer that keeps sending but never reads would grow the outbox without bound.
  if (outbox_.size() + in_flight_.size() > kMaxOutboxBytes) {
    return finish("the peer does not read (over " + std::to_string(kMaxOutboxBytes >> 20) +
                  " MiB queued for it)");
  }
  flush();
}

void ControlSession::close_after(std::optional<proto::ControlMessage> last,
                                 const std::string& reason) {
  if (!open_ || closing_) return;
  if (last) outbox_ += proto::encode_frame(proto::encode_message(*last));
  closing_ = true;
  close_reason_ = reason;
  if (in_flight_.empty() && outbox_.empty()) return finish(reason);
  // Reading stops here: a peer that neither reads nor closes would hold the connection forever.
  close_deadline_.expires_after(close_grace_);
  close_deadline_.async_wait([weak = weak_from_this()](const boost::system::error_code& error) {
    auto self = weak.lock();
    if (error || !self || !self->open_) return;
    self->reset_now(self->close_reason_ + " (the peer did not read its last messages)");
  });
  flush();
}

void ControlSession::abandon() {
  on_close_ = nullptr;
  on_message_ = nullptr;
  finish("abandoned");
}

void ControlSession::flush() {
  if (!in_flight_.empty() || outbox_.empty() || !open_) return;
  in_flight_.swap(outbox_);
  boost::asio::async_write(
      socket_, boost::asio::buffer(in_flight_),
      [self = shared_from_this()](const boost::system::error_code& error, size_t) {
        self->in_flight_.clear();
        if (!self->open_) return;
        if (error) return self->finish("write failed: " + error.message());
        if (!self->outbox_.empty()) return self->flush();
        if (self->closing_) self->finish(self->close_reason_);
      });
}

void ControlSession::reset_now(const std::string& reason) {
  boost::system::error_code ignored;
  socket_.set_option(boost::asio::socket_base::linger(true, 0), ignored);
  finish(reason);
}

void ControlSession::finish(const std::string& reason) {
  if (!open_) return;
  open_ = false;
  close_deadline_.cancel();
  boost::system::error_code ignored;
  socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  if (auto on_close = std::move(on_close_)) on_close(*this, reason);
  on_message_ = nullptr;
}

}  // namespace cohort
