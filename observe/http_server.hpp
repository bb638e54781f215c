// A small read-only HTTP/1.1 server (Boost.Beast) for /metrics and the status pages: GET and
// HEAD only, one request per connection, headers capped at 8 KiB and no body, 10 s to send the
// whole request (a deadline a trickle of bytes does not extend), at most 64 connections at once
// and 8 from any one address (more are closed at once, so one stranger cannot take every slot),
// and, when a token is set, `Authorization: Bearer TOKEN` required. The handler answers on the
// io thread. Owned by the rendezvous daemon; io_context thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace cohort::observe {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

/// Answers a GET for `target` (path and query, as sent).
using HttpHandler = std::function<HttpResponse(const std::string& target)>;

struct HttpOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  ///< 0: any free port
  std::string token;  ///< non-empty: requests must carry it as a bearer token
  size_t max_connections = 64;
  size_t max_connections_per_address = 8;
};

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, HttpOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  boost::system::error_code start();
  uint16_t port() const { return port_; }
  void stop();

 private:
  class Connection;
  /// What connections share with the server and may outlive it: after stop() they close
  /// instead of calling the handler.
  struct Shared {
    HttpOptions options;
    HttpHandler handler;
    size_t open_connections = 0;
    std::map<std::string, size_t> open_by_address;  ///< open connections per peer address
    bool stopped = false;
  };
  void accept_next();
  static bool over_caps(const Shared& shared, const std::string& peer);

  std::shared_ptr<Shared> shared_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_retry_;  ///< after an accept error (out of descriptors)
  uint16_t port_ = 0;
};

/// Whether `authorization` (the header's value) is "Bearer TOKEN", compared in constant time.
bool bearer_matches(const std::string& authorization, const std::string& token);

}  // namespace cohort::observe
