// One listening socket of a worker store, on one io_context: takes what its listen queue holds, in
// batches, and hands each new connection to its owner on that context's thread, to be served
// there. A store on an IoPool has one per thread, all bound to one port (SO_REUSEPORT), so the
// kernel spreads a storm of connects over as many queues (each as deep as the listen backlog)
// and no connection is handed across threads. Made and shared by a StoreService; accepts on its
// context's thread; close() from any thread.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>

#include "common/accept_backoff.hpp"
#include "common/descriptor_shortage.hpp"

namespace cohort {

class StoreListener : public std::enable_shared_from_this<StoreListener> {
 public:
  /// The most connections taken from the listen queue before the thread serves anything else.
  static constexpr int kAcceptBatch = 64;

  /// Called on the listener's thread with an accepted, non-blocking descriptor; takes it over.
  using Accepted = std::function<void(int descriptor, const boost::asio::ip::tcp::endpoint& peer)>;

  /// `shortage` is shared by the store's listeners, so that a shortage is said once.
  StoreListener(boost::asio::io_context& context, std::shared_ptr<DescriptorShortage> shortage,
                Accepted on_accepted);
  StoreListener(const StoreListener&) = delete;
  StoreListener& operator=(const StoreListener&) = delete;

  /// Before start(), on any thread. `share_port`: SO_REUSEPORT, for the listeners of one store.
  boost::system::error_code listen(const boost::asio::ip::tcp::endpoint& endpoint, bool dual_stack,
                                   bool share_port, int backlog);
  /// Whether a plain listener (no SO_REUSEPORT) could not bind `endpoint`: someone listens on
  /// its port, even a group that shares it. Listeners of one store on a fixed port ask first, so
  /// that a second store of the same user cannot join the first one's group.
  static boost::system::error_code port_in_use(boost::asio::io_context& context,
                                               const boost::asio::ip::tcp::endpoint& endpoint,
                                               bool dual_stack);
  uint16_t port() const { return port_; }
  boost::asio::io_context& context() { return context_; }

  /// Starts accepting, on the listener's thread.
  void start();
  /// Stops listening at once (the port no longer takes connections, those in its queue are
  /// reset); the socket is closed on the listener's thread. Any thread; idempotent.
  void close();

 private:
  void accept_next();
  void accept_queued(const boost::system::error_code& waited);
  void accept_later(const boost::system::error_code& error);

  boost::asio::io_context& context_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_retry_;
  AcceptBackoff backoff_;
  std::shared_ptr<DescriptorShortage> shortage_;
  Accepted on_accepted_;
  int descriptor_ = -1;  ///< set by listen(), for close() from another thread
  uint16_t port_ = 0;
  std::atomic<bool> closed_{false};
};

}  // namespace cohort
