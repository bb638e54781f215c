#include "store/store_service.hpp"

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
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(50);

// Out of descriptors or memory: accepting again at once would spin.
bool is_resource_shortage(const error_code& error) {
  return error == asio::error::no_descriptors || error == asio::error::no_buffer_space ||
         error == asio::error::no_memory ||
         error == error_code(ENFILE, boost::system::system_category());
}

}  // namespace

StoreService::StoreService(asio::io_context& io, StoreServerOptions options)
    : options_(std::move(options)), acceptor_(io), accept_retry_(io) {}

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
    if (!is_resource_shortage(error)) {
      accept_next();
      return;
    }
    log::warn("store: accept failed (", error.message(), "), retrying");
    accept_retry_.expires_after(kAcceptRetryDelay);
    accept_retry_.async_wait([self = shared_from_this()](const error_code& waited) {
      if (!waited) self->accept_next();
    });
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
  if (outcome.close_connection) from.close(outcome.reason);
}

void StoreService::forget(StoreConnectionId id) {
  if (sessions_.erase(id) > 0) connections_ = sessions_.size();
  store_.disconnect(id);
}

}  // namespace cohort
