// Accepts connections on one listening socket and hands each to its owner with its peer's
// address, until closed. Out of
// file descriptors it refuses the pending connections at once with a descriptor kept in reserve
// and says so once (DescriptorShortage); without a reserve, and after any other accept error, it
// waits 100 ms doubling to 1 s before it tries again, with one warning a second (AcceptBackoff).
// Owned by the control port's door and by the HTTP server; their io thread. (Each store's
// listeners accept in batches of their own: store/store_listener.*.)
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <memory>
#include <string>

#include "common/accept_backoff.hpp"
#include "common/clock.hpp"
#include "common/descriptor_shortage.hpp"

namespace cohort {

class AcceptLoop {
 public:
  /// A new connection and its peer's address ("?" when the peer is already gone).
  using Accepted = std::function<void(boost::asio::ip::tcp::socket, const std::string& peer)>;

  /// `who` starts the log lines ("rendezvous", "http").
  AcceptLoop(boost::asio::io_context& io, Clock& clock, std::string who, Accepted accepted);
  ~AcceptLoop() { close(); }
  AcceptLoop(const AcceptLoop&) = delete;
  AcceptLoop& operator=(const AcceptLoop&) = delete;

  /// Binds and listens on `address`:`port` (0: any free port), dual-stack for "::".
  boost::system::error_code open(const std::string& address, uint16_t port, int backlog);
  /// Starts accepting, after open().
  void start() { accept_next(); }
  /// Stops accepting, for good.
  void close();
  uint16_t port() const { return port_; }

 private:
  void accept_next();
  void accept_later(const boost::system::error_code& error);

  std::string who_;
  Accepted accepted_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::unique_ptr<Timer> retry_;  ///< armed while backing off
  Clock& clock_;
  AcceptBackoff backoff_;
  DescriptorShortage shortage_;
  bool closed_ = false;
};

}  // namespace cohort
