#include "store/store_service.hpp"

#include <algorithm>
#include <boost/asio/ip/v6_only.hpp>
#include <chrono>

#include "common/log.hpp"
#include "store/store_session.hpp"

namespace cohort {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

constexpr size_t kReadBufferBytes = 64 * 1024;
// Lines about refused accepts: at most one per this interval.

asio::ip::address unmapped(const asio::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) return address.to_v6().to_v4();
  return address;
}

}  // namespace

StoreService::StoreService(asio::io_context& io, StoreServerOptions options)
    : options_(std::move(options)), acceptor_(io), accept_retry_(io), store_(options_.limits) {
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
  read_buffer_.resize(kReadBufferBytes);
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
  if (!error) port_ = acceptor_.local_endpoint(error).port();
  if (error) acceptor_.close(ignored);
  return error;
}

void StoreService::accept_next() {
  if (closed_) return;
  acceptor_.async_accept([self = shared_from_this()](const error_code& error, tcp::socket socket) {
    self->on_accept(error, std::move(socket));
  });
}

void StoreService::on_accept(const error_code& error, tcp::socket socket) {
  if (closed_ || error == asio::error::operation_aborted) return;
  if (error) {
    if (AcceptBackoff::is_shortage(error)) {
      auto self = shared_from_this();
      return shortage_.refuse_pending(
          acceptor_, [self] { self->accept_next(); }, [self, error] { self->accept_later(error); });
    }
    accept_next();
    return;
  }
  backoff_.reset();
  shortage_.accepted();
  if (!allowed(socket)) {
    error_code ignored;
    socket.close(ignored);
    accept_next();
    return;
  }
  error_code option_error;
  socket.set_option(tcp::no_delay(true), option_error);
  if (!option_error) socket.non_blocking(true, option_error);
  if (!option_error) {
    StoreConnectionId id = ++next_id_;
    auto session = std::make_shared<StoreSession>(shared_from_this(), std::move(socket), id,
                                                  options_.legacy_numbering);
    sessions_.emplace(id, session);
    connections_ = sessions_.size();
    session->start();
  }
  accept_next();
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
bool StoreService::allowed(tcp::socket& socket) {
  if (!options_.allowed_peers) return true;
  error_code error;
  auto peer = socket.remote_endpoint(error);
  if (error) return false;  // already gone
  auto address = unmapped(peer.address());
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
  auto sessions = std::move(sessions_);
  sessions_.clear();
  for (auto& [id, session] : sessions) session->close("store stopped");
  connections_ = 0;
}

void StoreService::dispatch(StoreSession& from, StoreRequest&& request) {
  ++operations_;
  replies_.clear();
  StoreOutcome outcome = store_.apply(from.id(), std::move(request), replies_);
  // A session may close (write error) while replies are handed out: work on a local list.
  std::vector<StoreReply> replies = std::move(replies_);
  for (auto& reply : replies) {
    if (reply.connection == from.id()) {
      from.send(reply.bytes);
      continue;
    }
    auto found = sessions_.find(reply.connection);
    if (found != sessions_.end()) found->second->send(reply.bytes);
  }
  replies.clear();
  replies_ = std::move(replies);  // keep the capacity for the next request
  if (outcome.close_connection) from.refuse(outcome.reason);
}

void StoreService::forget(StoreConnectionId id) {
  if (sessions_.erase(id) > 0) connections_ = sessions_.size();
  store_.disconnect(id);
}

}  // namespace cohort
