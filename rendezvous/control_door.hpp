// The daemon's front door: accepts on the control port (AcceptLoop) and lets connections in
// through the ConnectionGate (GateKeeper: caps on connections that have not proven themselves,
// the oldest overdue ones evicted for newcomers, the rest waiting unread), starts each with its
// challenge, a small frame limit and the hello deadline, and takes them out again once proven or
// closed. On a port shared with the workers' store (share_with_store) it hands a PyTorch TCPStore
// client, told apart by its first bytes, to the store. What a session says is the daemon's.
// Owned by RendezvousDaemon; io_context thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/accept_loop.hpp"
#include "common/clock.hpp"
#include "common/gate_keeper.hpp"
#include "common/log_throttle.hpp"
#include "rendezvous/control_session.hpp"

namespace cohort {

class ControlDoor {
 public:
  /// Makes the session of a connection the gate admitted (its callbacks are the daemon's).
  using MakeSession = std::function<std::shared_ptr<ControlSession>(boost::asio::ip::tcp::socket)>;
  /// Takes a TCPStore client's connection, its first bytes unread; false when there is no store
  /// to serve it (the connection is then closed).
  using TakeStoreClient =
      std::function<bool(boost::asio::ip::tcp::socket socket, const std::string& peer)>;
  /// How long a silent peer waits for its challenge on a shared port: a cohort peer sends its
  /// probe at once (one from before that waits a heartbeat interval, 1 s, then sends it).
  static constexpr std::chrono::milliseconds kFirstWordsWait{1000};

  ControlDoor(boost::asio::io_context& io, Clock& clock, ConnectionLimits limits,
              std::chrono::milliseconds hello_timeout, MakeSession make_session);
  ~ControlDoor();
  ControlDoor(const ControlDoor&) = delete;
  ControlDoor& operator=(const ControlDoor&) = delete;

  /// Binds and listens on `address`:`port` (0: any free port), dual-stack for "::".
  boost::system::error_code open(const std::string& address, uint16_t port);
  /// Shares the port with the workers' store, before start(): a connection's first bytes decide
  /// whether it is challenged (a cohort peer's probe, anything else, or a kFirstWordsWait
  /// silence) or handed to `take` (a TCPStore request, which such a client sends first).
  void share_with_store(TakeStoreClient take) { take_store_client_ = std::move(take); }
  /// Starts accepting, after open().
  void start() { accept_loop_.start(); }
  /// Stops accepting and letting in, for good; the sessions let in stay the daemon's.
  void close();
  uint16_t port() const { return accept_loop_.port(); }
  /// Connections the gate counts (proven, strangers and those waiting).
  size_t connections() const { return gate_keeper_.connections(); }
  /// Connections accepted since the start, refused ones included.
  uint64_t accepted() const { return next_gate_id_ - 1; }

  /// The session said a valid hello (or made a proven request): full-size frames, no deadline,
  /// no longer a stranger.
  void proven(ControlSession& session);
  /// The session closed: its place goes to a waiting connection.
  void closed(ControlSession& session);

 private:
  void admit(boost::asio::ip::tcp::socket socket, const std::string& peer);
  void start_stranger(uint64_t gate_id);
  void challenge(ControlSession& session);
  void hear_first_words(const std::shared_ptr<ControlSession>& session);
  void judge_first_words(const std::shared_ptr<ControlSession>& session, int checks_left);
  void hand_to_store(const std::shared_ptr<ControlSession>& session);
  void evict(uint64_t gate_id, const std::string& why);

  Clock& clock_;
  std::chrono::milliseconds hello_timeout_;
  MakeSession make_session_;
  AcceptLoop accept_loop_;
  GateKeeper gate_keeper_;
  uint64_t next_gate_id_ = 1;
  std::map<uint64_t, std::weak_ptr<ControlSession>> strangers_;  ///< by gate id, until proven
  LogThrottle refusal_log_;  ///< refused connections: one log line a second
  LogThrottle tcpstore_client_log_{std::chrono::seconds(10)};  ///< a worker at the wrong port
  TakeStoreClient take_store_client_;  ///< set: the port is shared with the workers' store
  bool closed_ = false;
};

}  // namespace cohort
