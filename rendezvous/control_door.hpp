// The daemon's front door: listens on the control port and lets connections in through the
// ConnectionGate (caps on connections that have not proven themselves, the oldest overdue ones
// evicted for newcomers, the rest waiting unread), starts each with its challenge, a small frame
// limit and the hello deadline, and takes them out again once proven or closed. What a session
// says is the daemon's. Owned by RendezvousDaemon; io_context thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/accept_backoff.hpp"
#include "common/clock.hpp"
#include "common/connection_gate.hpp"
#include "common/descriptor_shortage.hpp"
#include "common/log_throttle.hpp"
#include "rendezvous/control_session.hpp"

namespace cohort {

class ControlDoor {
 public:
  /// Makes the session of a connection the gate admitted (its callbacks are the daemon's).
  using MakeSession = std::function<std::shared_ptr<ControlSession>(boost::asio::ip::tcp::socket)>;

  ControlDoor(boost::asio::io_context& io, Clock& clock, ConnectionLimits limits,
              std::chrono::milliseconds hello_timeout, MakeSession make_session);
  ~ControlDoor();
  ControlDoor(const ControlDoor&) = delete;
  ControlDoor& operator=(const ControlDoor&) = delete;

  /// Binds and listens on `address`:`port` (0: any free port), dual-stack for "::".
  boost::system::error_code open(const std::string& address, uint16_t port);
  /// Starts accepting, after open().
  void start();
  /// Stops accepting and waiting; the sessions let in stay the daemon's.
  void close();
  uint16_t port() const { return port_; }
  /// Connections the gate counts (proven, strangers and those waiting).
  size_t connections() const { return gate_.connections(); }

  /// The session said a valid hello (or made a proven request): full-size frames, no deadline,
  /// no longer a stranger.
  void proven(ControlSession& session);
  /// The session closed: its place goes to a waiting connection.
  void closed(ControlSession& session);

 private:
  void accept_next();
  void accept_later(const boost::system::error_code& error);
  void admit(boost::asio::ip::tcp::socket socket);
  void let_in(Admission admission);
  void pump_gate();
  void start_stranger(uint64_t gate_id);
  void evict(const Admission& admission);

  Clock& clock_;
  std::chrono::milliseconds hello_timeout_;
  MakeSession make_session_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::unique_ptr<Timer> accept_retry_;  ///< armed while out of descriptors
  AcceptBackoff accept_backoff_;
  DescriptorShortage accept_shortage_{"rendezvous"};
  ConnectionGate gate_;
  uint64_t next_gate_id_ = 1;
  std::map<uint64_t, std::weak_ptr<ControlSession>> strangers_;  ///< by gate id, until proven
  std::unique_ptr<Timer> gate_timer_;  ///< armed while connections wait for a stranger's grace
  bool letting_in_ = false;            ///< in let_in(): closes there pump the gate after it
  LogThrottle refusal_log_;            ///< refused connections: one log line a second
  bool closed_ = false;
};

}  // namespace cohort
