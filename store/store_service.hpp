// The shared core behind StoreServer: the listener, the Store, the live sessions by connection
// id, and the routing of the store's replies to them. It refuses peers outside the allowlist
// at accept, and backs off while the descriptor table is full. Held by the StoreServer facade and
// by every session and pending handler, so that a handler that runs after stop() finds it alive;
// stop() breaks the session <-> service cycle. The listener's side runs on the server's
// io_context thread; sessions (on their own threads, with an IoPool) call dispatch(), forget()
// and the charges, which take the lock that guards the Store and the registry.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
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
  /// The most connections accepted from the listen queue before the listener's thread serves
  /// anything else.
  static constexpr int kAcceptBatch = 64;

  StoreService(boost::asio::io_context& io, StoreServerOptions options);
  StoreService(const StoreService&) = delete;
  StoreService& operator=(const StoreService&) = delete;

  boost::system::error_code listen();
  void accept_next();
  void close();
  uint16_t port() const { return port_.load(); }
  size_t connection_count() const { return connections_.load(); }
  /// Requests served since the service started.
  uint64_t operations() const { return operations_.load(std::memory_order_relaxed); }
  const Store& store() const { return store_; }
  void read_store(const std::function<void(const Store&)>& reader);
  void set_allowed_peers(std::optional<std::vector<boost::asio::ip::address>> peers);

  /// For sessions, on their thread: applies a request from `from` and queues every reply on
  /// its session, in the store's order; the sessions it woke write on their own threads.
  void dispatch(StoreSession& from, StoreRequest& request);
  /// For sessions: a request still arriving charges (or returns) part of what it declared,
  /// against the store's quota; see Store::charge_unfinished.
  std::string charge_unfinished(uint64_t bytes);
  void release_unfinished(uint64_t bytes);
  /// For sessions: a closed session leaves the registry and the store's waiter lists.
  void forget(StoreConnectionId id);

 private:
  boost::system::error_code bind_and_listen(const boost::asio::ip::tcp::endpoint& endpoint,
                                            bool dual_stack);
  void accept_queued(const boost::system::error_code& waited);
  void accept_later(const boost::system::error_code& error);
  bool allowed(const boost::asio::ip::address& peer);
  void start_session(int descriptor, const boost::asio::ip::tcp& protocol);

  boost::asio::io_context& io_;
  StoreServerOptions options_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_retry_;
  AcceptBackoff backoff_;
  DescriptorShortage shortage_{"store"};
  LogThrottle refusal_log_;
  StoreConnectionId next_id_ = 0;

  std::mutex mutex_;  ///< guards the four below
  Store store_;
  std::unordered_map<StoreConnectionId, std::shared_ptr<StoreSession>> sessions_;
  StoreReplies replies_;  ///< dispatch()'s scratch, buffers kept

  std::atomic<size_t> connections_{0};
  std::atomic<uint64_t> operations_{0};
  std::atomic<uint16_t> port_{0};
  bool closed_ = false;
};

}  // namespace cohort
