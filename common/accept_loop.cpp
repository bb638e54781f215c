#include "common/accept_loop.hpp"

#include <boost/asio/ip/v6_only.hpp>

#include "common/log.hpp"

namespace cohort {

AcceptLoop::AcceptLoop(boost::asio::io_context& io, Clock& clock, std::string who,
                       Accepted accepted)
    : who_(who),
      accepted_(std::move(accepted)),
      acceptor_(io),
      retry_(clock.make_timer()),
      clock_(clock),
      shortage_(std::move(who)) {}

boost::system::error_code AcceptLoop::open(const std::string& address_text, uint16_t port,
                                           int backlog) {
  namespace ip = boost::asio::ip;
  boost::system::error_code error;
  ip::address address = ip::make_address(address_text, error);
  if (error) return error;
  ip::tcp::endpoint endpoint(address, port);
  acceptor_.open(endpoint.protocol(), error);
  if (error) return error;
  acceptor_.set_option(ip::tcp::acceptor::reuse_address(true), error);
  if (address.is_v6()) acceptor_.set_option(ip::v6_only(false), error);
  acceptor_.bind(endpoint, error);
  if (!error) acceptor_.listen(backlog, error);
  if (error) {
    acceptor_.close();
    return error;
  }
  port_ = acceptor_.local_endpoint().port();
  return {};
}

void AcceptLoop::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  retry_->cancel();
}

void AcceptLoop::accept_next() {
  acceptor_.async_accept(
      [this](const boost::system::error_code& error, boost::asio::ip::tcp::socket socket) {
        if (error == boost::asio::error::operation_aborted || closed_)
          return;  // aborted first: the loop may be gone
        if (AcceptBackoff::is_shortage(error)) {
          return shortage_.refuse_pending(
              acceptor_,
              [this] {
                if (!closed_) accept_next();
              },
              [this, error] { accept_later(error); });
        }
        if (error) return accept_later(error);
        shortage_.accepted();
        backoff_.reset();
        boost::system::error_code no_peer;
        auto remote = socket.remote_endpoint(no_peer);
        accepted_(std::move(socket), no_peer ? std::string("?") : remote.address().to_string());
        if (!closed_) accept_next();
      });
}

// The pending connection stays queued: accepting again at once would fail again at once.
void AcceptLoop::accept_later(const boost::system::error_code& error) {
  std::chrono::milliseconds delay = backoff_.next_delay();
  if (backoff_.time_to_log(clock_.now())) {
    log::warn(who_, ": accept failed (", error.message(), "), trying again in ", delay.count(),
              " ms");
  }
  retry_->start_after(delay, [this] {
    if (!closed_) accept_next();
  });
}

}  // namespace cohort
