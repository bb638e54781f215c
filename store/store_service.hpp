// The shared core behind StoreServer: the listeners, the Store, the live sessions by connection
// id, and the routing of the store's replies to them. It refuses peers outside the allowlist
// at accept. Held by the StoreServer facade and by every listener, session and pending handler,
// so that a handler that runs after stop() finds it alive; stop() breaks the cycles. listen(),
// start_accepting() and close() run on the server's io_context thread; with an IoPool there is a
// listener on each of the pool's threads, which accepts (allowed(), start_session()) and serves
// its own connections there. Sessions call dispatch(), forget() and the charges, which take the
// lock that guards the Store and the registry.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/descriptor_shortage.hpp"
#include "common/log_throttle.hpp"
#include "store/store.hpp"
#include "store/store_listener.hpp"
#include "store/store_server.hpp"

namespace cohort {

class StoreSession;

class StoreService : public std::enable_shared_from_this<StoreService> {
 public:
  StoreService(boost::asio::io_context& io, StoreServerOptions options);
  StoreService(const StoreService&) = delete;
  StoreService& operator=(const StoreService&) = delete;

  /// Binds and listens: once, or with an IoPool once per thread on one port.
  boost::system::error_code listen();
  void start_accepting();
  /// StoreServer::adopt: served on the service's context, or on one of the pool's.
  void adopt(boost::asio::ip::tcp::socket socket);
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
  /// against the store's quota; see Store::charge_held.
  std::string charge_held(uint64_t bytes);
  void release_held(uint64_t bytes);
  /// For sessions: replies not yet read count against the quota; see Store::hold.
  void hold(uint64_t bytes);
  /// For sessions: a closed session leaves the registry and the store's waiter lists.
  void forget(StoreConnectionId id);

 private:
  boost::system::error_code listen_on(const std::vector<boost::asio::io_context*>& contexts,
                                      const boost::asio::ip::tcp::endpoint& endpoint,
                                      bool dual_stack);
  /// A listener's thread: a connection it accepted.
  void on_accepted(int descriptor, const boost::asio::ip::tcp::endpoint& peer,
                   boost::asio::io_context& context);
  bool allowed(const boost::asio::ip::address& peer);
  void start_session(int descriptor, boost::asio::io_context& context);

  boost::asio::io_context& io_;
  StoreServerOptions options_;
  std::vector<std::shared_ptr<StoreListener>> listeners_;
  std::shared_ptr<DescriptorShortage> shortage_;
  std::mutex peers_mutex_;  ///< guards options_.allowed_peers and refusal_log_
  LogThrottle refusal_log_;
  std::atomic<StoreConnectionId> next_id_{0};
  size_t adopted_ = 0;  ///< connections adopted: the next goes to the pool's next context

  std::mutex mutex_;  ///< guards the four below
  Store store_;
  std::unordered_map<StoreConnectionId, std::shared_ptr<StoreSession>> sessions_;
  StoreReplies replies_;  ///< dispatch()'s scratch, buffers kept

  std::atomic<size_t> connections_{0};
  std::atomic<uint64_t> operations_{0};
  std::atomic<uint16_t> port_{0};
  std::atomic<bool> closed_{false};
};

}  // namespace cohort
