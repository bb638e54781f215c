#include "store/store_service.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/v6_only.hpp>
#include <chrono>

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
      acceptor_(io),
      accept_retry_(io),
      store_(options_.limits) {
  set_allowed_peers(std::move(options_.allowed_peers));
}

void StoreService::set_allowed_peers(std::optional<std::vector<asio::ip::address>> peers) {
  if (peers) {
    for (auto& peer : *peers) peer = unmapped(peer);
  }
  options_.allowed_peers = std::move(peers);
}

error_code StoreService::listen() {
  if (closed_) return asio::error::operation_aborted;
  error_code error;
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
    error = bind_and_listen(endpoint, any_address);
    if (!error) break;
  }
  if (error) return error;
  log::debug("store: listening on ", options_.address, " port=", port_.load());
  return {};
}

error_code StoreService::bind_and_listen(const tcp::endpoint& endpoint, bool dual_stack) {
  error_code error;
  acceptor_.open(endpoint.protocol(), error);
  if (error) return error;
  error_code ignored;
  if (dual_stack && endpoint.protocol() == tcp::v6()) {
    acceptor_.set_option(asio::ip::v6_only(false), ignored);
  }
  acceptor_.set_option(tcp::acceptor::reuse_address(true), ignored);
  acceptor_.bind(endpoint, error);
  if (!error) acceptor_.listen(options_.backlog, error);
  if (!error) acceptor_.non_blocking(true, error);  // accept_queued() accepts until EAGAIN
  if (!error) port_ = acceptor_.local_endpoint(error).port();
  if (error) acceptor_.close(ignored);
  return error;
}

void StoreService::accept_next() {
  if (closed_) return;
  acceptor_.async_wait(
      tcp::acceptor::wait_read,
      [self = shared_from_this()](const error_code& error) { self->accept_queued(error); });
}

// Accepts what the listen queue holds, at most kAcceptBatch at a time (the listener's thread
// serves sessions too), each straight onto the context that will serve it: one accept4 and one
// epoll registration per connection, where an accept onto the listener's context and a move to
// the pool's cost three more (getsockname, epoll_ctl DEL and ADD). Then waits for the queue.
void StoreService::accept_queued(const error_code& waited) {
  if (closed_ || waited == asio::error::operation_aborted) return;
  if (waited) return accept_later(waited);
  for (int accepted = 0; accepted < kAcceptBatch; ++accepted) {
    tcp::endpoint peer;
    socklen_t peer_size = static_cast<socklen_t>(peer.capacity());
    int descriptor =
        ::accept4(acceptor_.native_handle(), peer.data(), &peer_size, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (descriptor < 0) {
      error_code error(errno, asio::error::get_system_category());
      if (error == asio::error::would_block || error == asio::error::try_again) break;
      // ECONNABORTED, EINTR and the like: that connection is gone (or none was taken); go on.
      if (!AcceptBackoff::is_shortage(error)) continue;
      auto self = shared_from_this();
      return shortage_.refuse_pending(
          acceptor_, [self] { self->accept_next(); }, [self, error] { self->accept_later(error); });
    }
    backoff_.reset();
    shortage_.accepted();
    peer.resize(peer_size);
    if (allowed(peer.address())) {
      start_session(descriptor, peer.protocol());
    } else {
      ::close(descriptor);
    }
  }
  accept_next();
}

// Registers a session for an accepted descriptor and starts it on its context's thread: as a
// socket of Asio's reactor, which moves to the context's UringLoop after the pool's ring_after()
// requests where the pool has one (from the start if that is 0).
void StoreService::start_session(int descriptor, const tcp& protocol) {
  asio::io_context& context = options_.io_pool ? options_.io_pool->next() : io_;
  UringLoop* ring = options_.io_pool ? options_.io_pool->ring_of(context) : nullptr;
  uint32_t ring_after = ring != nullptr ? options_.io_pool->ring_after() : 0;
  int no_delay = 1;
  ::setsockopt(descriptor, IPPROTO_TCP, TCP_NODELAY, &no_delay, sizeof no_delay);
  tcp::socket socket(context);
  if (ring == nullptr || ring_after > 0) {
    error_code error;
    socket.assign(protocol, descriptor, error);
    if (error) {
      ::close(descriptor);
      return;
    }
    socket.non_blocking(true, error);  // Asio's own reads and writes must not wait either
    if (error) return;
  }
  StoreConnectionId id = ++next_id_;
  auto session = std::make_shared<StoreSession>(shared_from_this(), std::move(socket), ring,
                                                ring_after, descriptor, context.get_executor(), id,
                                                options_.legacy_numbering);
  {
    std::lock_guard lock(mutex_);
    sessions_.emplace(id, session);
    connections_ = sessions_.size();
  }
  session->start();
}

// The pending connection stays in the backlog, so accepting again at once would fail again at
// once: wait, longer each time, and say so at most once a second.
void StoreService::accept_later(const error_code& error) {
  std::chrono::milliseconds delay = backoff_.next_delay();
  if (backoff_.time_to_log(std::chrono::steady_clock::now())) {
    log::warn("store: accept failed (", error.message(), "), trying again in ", delay.count(),
              " ms");
  }
  accept_retry_.expires_after(delay);
  accept_retry_.async_wait([self = shared_from_this()](const error_code& waited) {
    if (!waited) self->accept_next();
  });
}

// Whether the peer of a new connection may use the store; logs a refusal (at most once per
// a second, counting the others).
bool StoreService::allowed(const asio::ip::address& peer) {
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
  if (closed_) return;
  closed_ = true;
  error_code ignored;
  acceptor_.close(ignored);
  accept_retry_.cancel();
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
// own threads (a write error there closes a session, which takes the lock again).
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

std::string StoreService::charge_unfinished(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  return store_.charge_unfinished(bytes);
}

void StoreService::release_unfinished(uint64_t bytes) {
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  store_.release_unfinished(bytes);
}

void StoreService::forget(StoreConnectionId id) {
  std::lock_guard lock(mutex_);
  if (sessions_.erase(id) > 0) connections_ = sessions_.size();
  store_.disconnect(id);
}

}  // namespace cohort
