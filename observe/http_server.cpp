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

namespace cohort::observe {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using boost::asio::ip::tcp;

namespace {

constexpr size_t kMaxHeaderBytes = 8 * 1024;
constexpr std::chrono::seconds kRequestTimeout{10};

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
// through its handlers' shared_ptr; counts itself in the server's open connections.
class HttpServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::string peer, std::shared_ptr<Shared> shared)
      : stream_(std::move(socket)), peer_(std::move(peer)), shared_(std::move(shared)) {
    ++shared_->open_connections;
    ++shared_->open_by_address[peer_];
    parser_.header_limit(kMaxHeaderBytes);
    parser_.body_limit(0);
  }
  ~Connection() {
    --shared_->open_connections;
    auto count = shared_->open_by_address.find(peer_);
    if (--count->second == 0) shared_->open_by_address.erase(count);
  }

  void start() {
    stream_.expires_after(kRequestTimeout);
    http::async_read(stream_, buffer_, parser_,
                     [self = shared_from_this()](beast::error_code error, size_t) {
                       if (error || self->shared_->stopped) return self->close();
                       self->respond();
                     });
  }

 private:
  void respond() {
    const auto& request = parser_.get();
    HttpResponse answer = answer_for(request);
    response_.result(static_cast<http::status>(answer.status));
    response_.version(11);
    response_.set(http::field::server, "cohortd");
    response_.set(http::field::content_type, answer.content_type);
    response_.set(http::field::cache_control, "no-store");
    response_.set(http::field::connection, "close");
    if (answer.status == 401) response_.set(http::field::www_authenticate, "Bearer");
    response_.body() = request.method() == http::verb::head ? "" : std::move(answer.body);
    response_.prepare_payload();
    if (request.method() == http::verb::head) response_.content_length(answer.body.size());
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code, size_t) { self->close(); });
  }

  HttpResponse answer_for(const http::request<http::empty_body>& request) const {
    if (request.method() != http::verb::get && request.method() != http::verb::head)
      return plain(405, "only GET and HEAD\n");
    const std::string& token = shared_->options.token;
    if (!token.empty() && !bearer_matches(std::string(request[http::field::authorization]), token))
      return plain(401, "this daemon has a token: send it as 'Authorization: Bearer TOKEN'\n");
    return shared_->handler(std::string(request.target()));
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  std::string peer_;
  beast::flat_buffer buffer_{kMaxHeaderBytes};
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> response_;
  std::shared_ptr<Shared> shared_;
};

HttpServer::HttpServer(boost::asio::io_context& io, HttpOptions options, HttpHandler handler)
    : shared_(std::make_shared<Shared>(Shared{std::move(options), std::move(handler)})),
      acceptor_(io),
      accept_retry_(io) {}

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
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  accept_retry_.cancel();
}

bool HttpServer::over_caps(const Shared& shared, const std::string& peer) {
  if (shared.open_connections >= shared.options.max_connections) return true;
  auto open = shared.open_by_address.find(peer);
  return open != shared.open_by_address.end() &&
         open->second >= shared.options.max_connections_per_address;
}

void HttpServer::accept_next() {
  acceptor_.async_accept([this](boost::system::error_code error, tcp::socket socket) {
    if (shared_->stopped || error == boost::asio::error::operation_aborted) return;
    if (error) {  // out of descriptors, most likely: try again in a while, do not spin
      log::debug("http: accept failed: ", error.message());
      accept_retry_.expires_after(std::chrono::milliseconds(100));
      accept_retry_.async_wait([this](boost::system::error_code waited) {
        if (!waited) accept_next();
      });
      return;
    }
    std::string peer = peer_address(socket);
    if (over_caps(*shared_, peer)) {
      boost::system::error_code ignored;
      socket.close(ignored);  // over a cap: closed unread
    } else {
      std::make_shared<Connection>(std::move(socket), std::move(peer), shared_)->start();
    }
    accept_next();
  });
}

}  // namespace cohort::observe
