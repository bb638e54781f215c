#include "store/store_listener.hpp"

#include <sys/socket.h>

#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>

#include "common/log.hpp"

namespace cohort {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

// Opens `socket` and binds it to `endpoint` as every store listener is bound (SO_REUSEADDR; IPv6
// dual-stack where asked; SO_REUSEPORT where the port is to be shared).
error_code bind_socket(tcp::acceptor& socket, const tcp::endpoint& endpoint, bool dual_stack,
                       bool share_port) {
  error_code error;
  socket.open(endpoint.protocol(), error);
  if (error) return error;
  error_code ignored;
  if (dual_stack && endpoint.protocol() == tcp::v6()) {
    socket.set_option(asio::ip::v6_only(false), ignored);
  }
  socket.set_option(tcp::acceptor::reuse_address(true), ignored);
  if (share_port) {
    int on = 1;
    if (::setsockopt(socket.native_handle(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) {
      error = error_code(errno, asio::error::get_system_category());
    }
  }
  if (!error) socket.bind(endpoint, error);
  return error;
}

}  // namespace

StoreListener::StoreListener(asio::io_context& context,
                             std::shared_ptr<DescriptorShortage> shortage, Accepted on_accepted)
    : context_(context),
      acceptor_(context),
      accept_retry_(context),
      shortage_(std::move(shortage)),
      on_accepted_(std::move(on_accepted)) {}

error_code StoreListener::port_in_use(asio::io_context& context, const tcp::endpoint& endpoint,
                                      bool dual_stack) {
  tcp::acceptor probe(context);
  return bind_socket(probe, endpoint, dual_stack, false);
}

error_code StoreListener::listen(const tcp::endpoint& endpoint, bool dual_stack, bool share_port,
                                 int backlog) {
  error_code error = bind_socket(acceptor_, endpoint, dual_stack, share_port);
  if (!error) acceptor_.listen(backlog, error);
  if (!error) acceptor_.non_blocking(true, error);  // accept_queued() accepts until EAGAIN
  if (!error) port_ = acceptor_.local_endpoint(error).port();
  if (error) {
    error_code ignored;
    acceptor_.close(ignored);
    return error;
  }
  descriptor_ = acceptor_.native_handle();
  return {};
}

void StoreListener::start() {
  asio::post(context_, [self = shared_from_this()] { self->accept_next(); });
}

// shutdown() on a listening socket stops it listening there and then, whichever thread asks: the
// port takes no more connections and the ones in its queue are reset, and the wait below ends.
// The descriptor itself is closed on the listener's thread, the only one that uses it.
void StoreListener::close() {
  if (closed_.exchange(true) || descriptor_ < 0) return;
  ::shutdown(descriptor_, SHUT_RDWR);
  asio::post(context_, [self = shared_from_this()] {
    error_code ignored;
    self->acceptor_.close(ignored);
    self->accept_retry_.cancel();
  });
}

void StoreListener::accept_next() {
  if (closed_) return;
  acceptor_.async_wait(
      tcp::acceptor::wait_read,
      [self = shared_from_this()](const error_code& error) { self->accept_queued(error); });
}

// Accepts what the listen queue holds, at most kAcceptBatch at a time (the thread serves sessions
// too), each to be served on this thread: one accept4 and one registration per connection. Then
// waits for the queue again.
void StoreListener::accept_queued(const error_code& waited) {
  if (closed_ || waited == asio::error::operation_aborted) return;
  if (waited) return accept_later(waited);
  for (int accepted = 0; accepted < kAcceptBatch; ++accepted) {
    tcp::endpoint peer;
    socklen_t peer_size = static_cast<socklen_t>(peer.capacity());
    int descriptor =
        ::accept4(acceptor_.native_handle(), peer.data(), &peer_size, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (descriptor < 0) {
      error_code error(errno, asio::error::get_system_category());
      if (error == asio::error::would_block || error == asio::error::try_again) break;
      // ECONNABORTED, EINTR and the like: that connection is gone (or none was taken); go on.
      if (!AcceptBackoff::is_shortage(error)) continue;
      auto self = shared_from_this();
      return shortage_->refuse_pending(
          acceptor_, [self] { self->accept_next(); }, [self, error] { self->accept_later(error); });
    }
    backoff_.reset();
    shortage_->accepted();
    peer.resize(peer_size);
    on_accepted_(descriptor, peer);
  }
  accept_next();
}

// The pending connection stays in the backlog, so accepting again at once would fail again at
// once: wait, longer each time, and say so at most once a second.
void StoreListener::accept_later(const error_code& error) {
  std::chrono::milliseconds delay = backoff_.next_delay();
  if (backoff_.time_to_log(std::chrono::steady_clock::now())) {
    log::warn("store: accept failed (", error.message(), "), trying again in ", delay.count(),
              " ms");
  }
  accept_retry_.expires_after(delay);
  accept_retry_.async_wait([self = shared_from_this()](const error_code& waited) {
    if (!waited) self->accept_next();
  });
}

}  // namespace cohort
