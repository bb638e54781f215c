// The worker store's TCP server: serves one Store to PyTorch TCPStore clients (1.13 and 2.x) on
// an address and port, in the caller's io_context. Cheap to create and destroy, so a component
// can host a fresh one per round. Owned by its host (rendezvous daemon, launcher, test); every
// method on the io_context's thread (or while it is not running), except port(),
// connection_count() and operations(), which any thread may read; with an IoPool the connections
// are served on the pool's threads. PyTorch's clients cannot authenticate, so a host names the
// peer addresses it may serve (allowed_peers); anyone else is refused at accept.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/tcpstore_codec.hpp"
#include "store/tcpstore_limits.hpp"

namespace cohort {

class IoPool;
class Store;
class ByteBudget;
class StoreService;

struct StoreServerOptions {
  /// An IP literal. "" or "::" listens on every address, dual-stack (IPv4 only without IPv6).
  std::string address = "127.0.0.1";
  uint16_t port = 0;  ///< 0: any free port; port() tells which
  int backlog = 4096;
  /// Opcode table of connections that do not start with VALIDATE (protocol §2.1).
  StoreNumbering legacy_numbering = StoreNumbering::Legacy113;
  /// The quota and size limits of the served Store.
  StoreLimits limits;
  /// Peers whose connections are served; others are closed at accept. nullopt: everyone (only
  /// the standalone `cohortd --tcpstore-port` store, which has no members to name); an empty
  /// list: no one.
  std::optional<std::vector<boost::asio::ip::address>> allowed_peers;
  /// Where connections are served: nullptr, all on the server's own io_context; otherwise a
  /// listener on each of the pool's contexts (one port) serves there what it accepts, and the
  /// Store is behind a lock. The pool must outlive the server.
  IoPool* io_pool = nullptr;
  /// Shared with the host's other stores: what they may hold together. nullptr: only the quota.
  std::shared_ptr<ByteBudget> budget;
};

class StoreServer {
 public:
  StoreServer(boost::asio::io_context& io, StoreServerOptions options);
  /// stop(): closes the listener and every connection.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// Binds, listens and starts accepting; an error (address in use, bad address) otherwise.
  boost::system::error_code start();
  /// The bound port once start() succeeded.
  uint16_t port() const;
  /// Closes the listener and every connection. Idempotent; the server cannot start again.
  void stop();
  /// Serves a connection another listener accepted (the rendezvous port, shared), its first
  /// bytes unread, as if accepted here: the same allowlist, the same sessions.
  void adopt(boost::asio::ip::tcp::socket socket);
  /// Replaces StoreServerOptions::allowed_peers for connections accepted from now on.
  void set_allowed_peers(std::optional<std::vector<boost::asio::ip::address>> peers);
  /// Live client connections.
  size_t connection_count() const;
  /// Requests served so far.
  uint64_t operations() const;
  /// The served store, for tests and tools: only while no connection is being served.
  const Store& store() const;
  /// Calls `reader` with the served store, from any thread (under the store's lock).
  void read_store(const std::function<void(const Store&)>& reader) const;

 private:
  std::shared_ptr<StoreService> service_;
};

}  // namespace cohort
