#include "store/store_service.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <boost/asio/post.hpp>

#include "common/epoll_loop.hpp"
#include "common/io_pool.hpp"
#include "common/log.hpp"
#include "common/uring_loop.hpp"
#include "store/store_session.hpp"

namespace cohort {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

asio::ip::address unmapped(const asio::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) return address.to_v6().to_v4();
  return address;
}

}  // namespace

StoreService::StoreService(asio::io_context& io, StoreServerOptions options)
    : io_(io),
      options_(std::move(options)),
      shortage_(std::make_shared<DescriptorShortage>("store")),
      store_(options_.limits, options_.budget) {
  // Without a pool the service's own context serves; its loop is made now, not for the first
  // connection, which may come when descriptors have run out.
  if (options_.io_pool == nullptr) EpollLoop::of(io_);
  set_allowed_peers(std::move(options_.allowed_peers));
}

void StoreService::set_allowed_peers(std::optional<std::vector<asio::ip::address>> peers) {
  if (peers) {
    for (auto& peer : *peers) peer = unmapped(peer);
  }
  std::lock_guard lock(peers_mutex_);
  options_.allowed_peers = std::move(peers);
}

error_code StoreService::listen() {
  if (closed_ || !listeners_.empty()) return asio::error::operation_aborted;
  error_code error;
  std::vector<asio::io_context*> contexts{&io_};
  if (options_.io_pool != nullptr) {
    contexts.clear();
    for (size_t i = 0; i < options_.io_pool->size(); ++i) {
      contexts.push_back(&options_.io_pool->context(i));
    }
  }
  std::vector<tcp::endpoint> candidates;
  bool any_address = options_.address.empty() || options_.address == "::";
  if (any_address) {  // dual-stack IPv6, or IPv4 alone where IPv6 is off
    candidates = {tcp::endpoint(tcp::v6(), options_.port), tcp::endpoint(tcp::v4(), options_.port)};
  } else {
    auto address = asio::ip::make_address(options_.address, error);
    if (error) return error;
    candidates = {tcp::endpoint(address, options_.port)};
  }
  for (const auto& endpoint : candidates) {
    error = listen_on(contexts, endpoint, any_address);
    if (!error) break;
  }
  if (error) return error;
  log::debug("store: listening on ", options_.address, " port=", port_.load(), " (",
             listeners_.size(), listeners_.size() == 1 ? " listener)" : " listeners)");
  return {};
}

// One listener per context, all on the first one's port (SO_REUSEPORT where there are several);
// none if any of them fails.
error_code StoreService::listen_on(const std::vector<asio::io_context*>& contexts,
                                   const tcp::endpoint& endpoint, bool dual_stack) {
  tcp::endpoint where = endpoint;
  bool share_port = contexts.size() > 1;
  if (share_port && where.port() != 0) {  // port 0: the kernel picks one no one listens on
    error_code error = StoreListener::port_in_use(*contexts[0], where, dual_stack);
    if (error) return error;
  }
  for (asio::io_context* context : contexts) {
    auto listener = std::make_shared<StoreListener>(
        *context, shortage_,
        [self = shared_from_this(), context](int descriptor, const tcp::endpoint& peer) {
          self->on_accepted(descriptor, peer, *context);
        });
    error_code error = listener->listen(where, dual_stack, share_port, options_.backlog);
    if (error) {
      for (auto& made : listeners_) made->close();
      listeners_.clear();
      return error;
    }
    where.port(listener->port());
    listeners_.push_back(std::move(listener));
  }
  port_ = where.port();
  return {};
}

void StoreService::start_accepting() {
  if (closed_) return;
  for (auto& listener : listeners_) listener->start();
}

void StoreService::adopt(tcp::socket socket) {
  error_code error;
  tcp::endpoint peer = socket.remote_endpoint(error);
  if (error || closed_) return;  // the socket closes
  int descriptor = socket.release(error);
  if (error) return;
  ::fcntl(descriptor, F_SETFL, ::fcntl(descriptor, F_GETFL) | O_NONBLOCK);
  asio::io_context* context = &io_;
  if (options_.io_pool != nullptr) {
    context = &options_.io_pool->context(adopted_++ % options_.io_pool->size());
  }
  asio::post(*context, [self = shared_from_this(), descriptor, peer, context] {
    self->on_accepted(descriptor, peer, *context);
  });
}

void StoreService::on_accepted(int descriptor, const tcp::endpoint& peer,
                               asio::io_context& context) {
  if (closed_ || !allowed(peer.address())) {
    ::close(descriptor);
    return;
  }
  start_session(descriptor, context);
}

// Registers a session for an accepted descriptor and starts it on its context's thread (this
// one): through the context's EpollLoop, and its UringLoop after the pool's ring_after()
// requests where the pool has one (from the start if that is 0).
void StoreService::start_session(int descriptor, asio::io_context& context) {
  IoPool* pool = options_.io_pool;
  EpollLoop& epoll = pool != nullptr ? pool->epoll_of(context) : EpollLoop::of(context);
  UringLoop* ring = pool != nullptr ? pool->ring_of(context) : nullptr;
  uint32_t ring_after = ring != nullptr ? pool->ring_after() : 0;
  int no_delay = 1;
  ::setsockopt(descriptor, IPPROTO_TCP, TCP_NODELAY, &no_delay, sizeof no_delay);
  StoreConnectionId id = ++next_id_;
  auto session =
      std::make_shared<StoreSession>(shared_from_this(), descriptor, epoll, ring, ring_after,
                                     context.get_executor(), id, options_.legacy_numbering);
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;  // close() took the registry already: the session closes its descriptor
    sessions_.emplace(id, session);
    connections_ = sessions_.size();
  }
  session->start();
}

// Whether the peer of a new connection may use the store; logs a refusal (at most once per
// a second, counting the others).
bool StoreService::allowed(const asio::ip::address& peer) {
  std::lock_guard lock(peers_mutex_);
  if (!options_.allowed_peers) return true;
  auto address = unmapped(peer);
  const auto& peers = *options_.allowed_peers;
  if (std::find(peers.begin(), peers.end(), address) != peers.end()) return true;
  if (refusal_log_.due(std::chrono::steady_clock::now())) {
    size_t left_out = refusal_log_.suppressed();
    log::warn("store: refused a connection from ", address.to_string(),
              ": not a node of this round",
              left_out > 0 ? cat(" (", left_out, " more since the last line)") : std::string());
  }
  return false;
}

void StoreService::close() {
  if (closed_.exchange(true)) return;
  for (auto& listener : listeners_) listener->close();
  listeners_.clear();
  std::unordered_map<StoreConnectionId, std::shared_ptr<StoreSession>> sessions;
  {
    std::lock_guard lock(mutex_);
    sessions = std::move(sessions_);
    sessions_.clear();
    connections_ = 0;
  }
  // This is the listener's thread, or its io_context is not running: sessions of that context
  // close now, the pool's on their own threads.
  for (auto& [id, session] : sessions) {
    if (session->executor() == io_.get_executor()) {
      session->close("store stopped");
    } else {
      session->close_on_its_thread("store stopped");
    }
  }
}

// Replies are queued under the lock, so each session receives its bytes in the order the store
// produced them whichever thread produced them; the writes happen after it, on the sessions'
// own threads (a write error there closes a session, which takes the lock again). The requester's
// large reply is charged under the lock too, so that the next request, on whichever thread, sees
// it in the quota (Store::hold_reply).
void StoreService::dispatch(StoreSession& from, StoreRequest& request) {
  operations_.fetch_add(1, std::memory_order_relaxed);
  StoreOutcome outcome;
  thread_local std::vector<std::shared_ptr<StoreSession>> woken;  // capacity kept
  {
    std::lock_guard lock(mutex_);
    replies_.clear();
    outcome = store_.apply(from.id(), request, replies_);
    for (const auto& reply : replies_) {
      if (reply.connection == from.id()) {
        from.queue(reply.bytes);
        continue;
      }
      auto found = sessions_.find(reply.connection);
      if (found == sessions_.end()) continue;
      found->second->queue(reply.bytes);
      woken.push_back(found->second);
    }
    store_.hold_reply(from.more_to_hold(from.unsent()));  // checked and charged in one go
  }
  for (auto& session : woken) session->write_queued();
  woken.clear();
  if (woken.capacity() > 1024) woken.shrink_to_fit();
  if (outcome.close_connection) from.refuse(outcome.reason);
}

void StoreService::read_store(const std::function<void(const Store&)>& reader) {
  std::lock_guard lock(mutex_);
  reader(store_);
}

std::string StoreService::charge_held(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  return store_.charge_held(bytes);
}

void StoreService::release_held(uint64_t bytes) {
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  store_.release_held(bytes);
}

void StoreService::hold(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  store_.hold(bytes);
}

void StoreService::forget(StoreConnectionId id) {
  std::lock_guard lock(mutex_);
  if (sessions_.erase(id) > 0) connections_ = sessions_.size();
  store_.disconnect(id);
}

}  // namespace cohort
