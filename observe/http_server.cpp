#include "observe/http_server.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>

#include "common/log.hpp"
#include "common/text.hpp"

namespace cohort::observe {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using boost::asio::ip::tcp;

namespace {

constexpr size_t kMaxHeaderBytes = 8 * 1024;

HttpResponse plain(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", body};
}

std::string peer_address(const tcp::socket& socket) {
  boost::system::error_code error;
  auto remote = socket.remote_endpoint(error);
  return error ? std::string("?") : remote.address().to_string();
}

}  // namespace

bool bearer_matches(const std::string& authorization, const std::string& token) {
  const std::string prefix = "Bearer ";
  if (authorization.size() != prefix.size() + token.size() ||
      authorization.compare(0, prefix.size(), prefix) != 0) {
    return false;
  }
  unsigned char differ = 0;
  for (size_t i = 0; i < token.size(); ++i)
    differ |= static_cast<unsigned char>(authorization[prefix.size() + i] ^ token[i]);
  return differ == 0;
}

// One accepted connection: reads one request, writes one response, closes. Holds itself alive
// through its handlers' shared_ptr; counts itself at the server's gate (a stranger until its
// request has come) and its answer's body in the server's pending bytes.
class HttpServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, uint64_t id, std::shared_ptr<Shared> shared)
      : stream_(std::move(socket)), id_(id), shared_(std::move(shared)) {
    parser_.header_limit(kMaxHeaderBytes);
    parser_.body_limit(0);
  }
  ~Connection() {
    shared_->gate.closed(id_);
    shared_->strangers.erase(id_);
    shared_->pending_bytes -= held_bytes_;
    if (shared_->pump_gate) shared_->pump_gate();
  }

  void start() {
    stream_.expires_after(shared_->options.timeout);
    http::async_read(stream_, buffer_, parser_,
                     [self = shared_from_this()](beast::error_code error, size_t) {
                       if (error || self->shared_->stopped) return self->close();
                       self->shared_->gate.proven(self->id_);  // its request came
                       self->shared_->strangers.erase(self->id_);
                       self->respond();
                       if (self->shared_->pump_gate) self->shared_->pump_gate();
                     });
  }

  /// Closes at once (evicted to make room for a newcomer).
  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  void respond() {
    const auto& request = parser_.get();
    HttpResponse answer = within_budget(answer_for(request));
    response_.result(static_cast<http::status>(answer.status));
    response_.version(11);
    response_.set(http::field::server, "cohortd");
    response_.set(http::field::content_type, answer.content_type);
    response_.set(http::field::cache_control, "no-store");
    response_.set(http::field::connection, "close");
    if (answer.status == 401) response_.set(http::field::www_authenticate, "Bearer");
    if (answer.status == 503) response_.set(http::field::retry_after, "1");
    response_.body() = request.method() == http::verb::head ? "" : std::move(answer.body);
    response_.prepare_payload();
    if (request.method() == http::verb::head) response_.content_length(answer.body.size());
    held_bytes_ = response_.body().size();
    shared_->pending_bytes += held_bytes_;
    stream_.expires_after(shared_->options.timeout);  // a client that never reads is closed
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code, size_t) { self->close(); });
  }

  // The answer, or a short 503 when it is bigger than one page may be or than what is left of
  // the budget for answers still being sent.
  HttpResponse within_budget(HttpResponse answer) const {
    const HttpOptions& options = shared_->options;
    if (answer.body.size() > options.max_page_bytes) {
      return plain(503, cat("this page is ", answer.body.size(), " bytes, over the limit of ",
                            options.max_page_bytes, "\n"));
    }
    if (shared_->pending_bytes + answer.body.size() > options.max_pending_bytes) {
      return plain(503, cat("busy: ", shared_->pending_bytes,
                            " bytes of answers are still being sent; try again\n"));
    }
    return answer;
  }

  HttpResponse answer_for(const http::request<http::empty_body>& request) const {
    if (request.method() != http::verb::get && request.method() != http::verb::head)
      return plain(405, "only GET and HEAD\n");
    const std::string& token = shared_->options.token;
    if (!token.empty() && !bearer_matches(std::string(request[http::field::authorization]), token))
      return plain(401, "this daemon has a token: send it as 'Authorization: Bearer TOKEN'\n");
    return shared_->handler(std::string(request.target()));
  }

  beast::tcp_stream stream_;
  uint64_t id_;
  size_t held_bytes_ = 0;
  beast::flat_buffer buffer_{kMaxHeaderBytes};
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> response_;
  std::shared_ptr<Shared> shared_;
};

HttpServer::HttpServer(boost::asio::io_context& io, HttpOptions options, HttpHandler handler)
    : shared_(std::make_shared<Shared>(Shared{std::move(options), std::move(handler)})),
      acceptor_(io),
      accept_retry_(io),
      gate_timer_(io) {
  shared_->pump_gate = [this] { pump_gate(); };
}

HttpServer::~HttpServer() { stop(); }

boost::system::error_code HttpServer::start() {
  boost::system::error_code error;
  const HttpOptions& options = shared_->options;
  tcp::endpoint endpoint(boost::asio::ip::make_address(options.address, error), options.port);
  if (error) return error;
  acceptor_.open(endpoint.protocol(), error);
  if (!error) acceptor_.set_option(tcp::acceptor::reuse_address(true), error);
  if (!error) acceptor_.bind(endpoint, error);
  if (!error) acceptor_.listen(boost::asio::socket_base::max_listen_connections, error);
  if (error) return error;
  port_ = acceptor_.local_endpoint().port();
  accept_next();
  return {};
}

void HttpServer::stop() {
  if (shared_->stopped) return;
  shared_->stopped = true;
  shared_->handler = nullptr;  // it may point into the owner, which is going away
  shared_->pump_gate = nullptr;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  accept_retry_.cancel();
  gate_timer_.cancel();
  shared_->waiting.clear();  // never read: closed as they go
}

void HttpServer::accept_next() {
  acceptor_.async_accept([this](boost::system::error_code error, tcp::socket socket) {
    if (shared_->stopped || error == boost::asio::error::operation_aborted) return;
    if (AcceptBackoff::is_shortage(error)) {  // refuse the pending connection, do not spin
      return accept_shortage_.refuse_pending(
          acceptor_,
          [this] {
            if (!shared_->stopped) accept_next();
          },
          [this, error] { accept_later(error); });
    }
    if (error) return accept_later(error);
    accept_shortage_.accepted();
    accept_backoff_.reset();
    admit(std::move(socket));
    accept_next();
  });
}

// After an accept error other than a shortage it can refuse through (100 ms doubling to 1 s).
void HttpServer::accept_later(const boost::system::error_code& error) {
  std::chrono::milliseconds delay = accept_backoff_.next_delay();
  if (accept_backoff_.time_to_log(std::chrono::steady_clock::now())) {
    log::warn("http: accept failed (", error.message(), "), trying again in ", delay.count(),
              " ms");
  }
  accept_retry_.expires_after(delay);
  accept_retry_.async_wait([this](boost::system::error_code waited) {
    if (!waited && !shared_->stopped) accept_next();
  });
}

// Past a cap the newcomer waits, unread, until a stranger answers, closes or has had its grace;
// then the oldest such makes room (common/connection_gate.hpp). Refused only at the cap on
// connections with no stranger overdue and none waiting.
void HttpServer::admit(tcp::socket socket) {
  Shared& shared = *shared_;
  uint64_t id = shared.next_id++;
  Admission admission =
      shared.gate.admit(id, peer_address(socket), std::chrono::steady_clock::now());
  if (!admission.refusal.empty()) {
    boost::system::error_code ignored;
    socket.close(ignored);
    return;
  }
  shared.waiting[id] = std::make_shared<Connection>(std::move(socket), id, shared_);
  let_in(std::move(admission));
}

// Carries out the gate's decisions, then pumps it until it has none; arms gate_timer_ for the
// next stranger's grace to end while connections wait.
void HttpServer::let_in(Admission admission) {
  Shared& shared = *shared_;
  letting_in_ = true;
  for (;;) {
    for (uint64_t evicted : admission.evict) {
      shared.waiting.erase(evicted);  // one waiting at the cap on connections: closed unread
      auto found = shared.strangers.find(evicted);
      if (found == shared.strangers.end()) continue;
      if (auto stranger = found->second.lock()) stranger->close();
      shared.strangers.erase(found);
    }
    for (uint64_t id : admission.start) {
      auto found = shared.waiting.find(id);
      if (found == shared.waiting.end()) continue;
      std::shared_ptr<Connection> connection = std::move(found->second);
      shared.waiting.erase(found);
      shared.strangers[id] = connection;
      connection->start();
    }
    admission = shared.gate.pump(std::chrono::steady_clock::now());
    if (admission.evict.empty() && admission.start.empty()) break;
  }
  letting_in_ = false;
  if (auto at = shared.gate.next_pump(std::chrono::steady_clock::now())) {
    gate_timer_.expires_at(*at);
    gate_timer_.async_wait([this](boost::system::error_code waited) {
      if (!waited) pump_gate();
    });
  } else {
    gate_timer_.cancel();
  }
}

void HttpServer::pump_gate() {
  if (letting_in_ || shared_->stopped) return;
  let_in(shared_->gate.pump(std::chrono::steady_clock::now()));
}

}  // namespace cohort::observe
