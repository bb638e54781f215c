// The shared core behind StoreServer: the listener, the Store, the live sessions by connection
// id, and the routing of the store's replies to them. It refuses peers outside the allowlist
// at accept, and backs off while the descriptor table is full. Held by the StoreServer facade and
// by every session and pending handler, so that a handler that runs after stop() finds it alive;
// stop() breaks the session <-> service cycle. io_context thread only, except port() and
// connection_count().
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/accept_backoff.hpp"
#include "common/descriptor_shortage.hpp"
#include "common/log_throttle.hpp"
#include "store/store.hpp"
#include "store/store_server.hpp"

namespace cohort {

class StoreSession;

class StoreService : public std::enable_shared_from_this<StoreService> {
 public:
  StoreService(boost::asio::io_context& io, StoreServerOptions options);
  StoreService(const StoreService&) = delete;
  StoreService& operator=(const StoreService&) = delete;

  boost::system::error_code listen();
  void accept_next();
  void close();
  uint16_t port() const { return port_.load(); }
  size_t connection_count() const { return connections_.load(); }
  /// Requests served since the service started (io thread).
  uint64_t operations() const { return operations_; }
  const Store& store() const { return store_; }
  void set_allowed_peers(std::optional<std::vector<boost::asio::ip::address>> peers);

  /// For sessions: applies a request from `from` and hands every reply to its session.
  void dispatch(StoreSession& from, StoreRequest&& request);
  /// For sessions: a request still arriving charges (or returns) part of what it declared,
  /// against the store's quota; see Store::charge_unfinished.
  std::string charge_unfinished(uint64_t bytes) { return store_.charge_unfinished(bytes); }
  void release_unfinished(uint64_t bytes) { store_.release_unfinished(bytes); }
  /// For sessions: a closed session leaves the registry and the store's waiter lists.
  void forget(StoreConnectionId id);
  /// For sessions: one read buffer shared by all (one thread; consumed before the next read).
  std::span<char> read_buffer() { return read_buffer_; }

 private:
  boost::system::error_code bind_and_listen(const boost::asio::ip::tcp::endpoint& endpoint,
                                            bool dual_stack);
  void on_accept(const boost::system::error_code& error, boost::asio::ip::tcp::socket socket);
  void accept_later(const boost::system::error_code& error);
  bool allowed(boost::asio::ip::tcp::socket& socket);

  StoreServerOptions options_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_retry_;
  AcceptBackoff backoff_;
  DescriptorShortage shortage_{"store"};
  LogThrottle refusal_log_;
  Store store_;
  std::unordered_map<StoreConnectionId, std::shared_ptr<StoreSession>> sessions_;
  StoreConnectionId next_id_ = 0;
  std::vector<char> read_buffer_;
  std::vector<StoreReply> replies_;
  std::atomic<size_t> connections_{0};
  uint64_t operations_ = 0;
  std::atomic<uint16_t> port_{0};
  bool closed_ = false;
};

}  // namespace cohort
