// A small read-only HTTP/1.1 server (Boost.Beast) for /metrics and the status pages: GET and
// HEAD only, one request per connection, headers capped at 8 KiB and no body, 10 s to send the
// whole request (a deadline a trickle of bytes does not extend) and 10 s to read the answer. A
// connection is a stranger until its request has come: 64 strangers at most and 8 from any one
// address (common/connection_gate.hpp, driven by a GateKeeper). Past a cap a newcomer waits,
// unread, until a stranger answers, closes or has had 500 ms, then takes the place of the oldest
// such: silent connections cannot keep Prometheus or an admin out, and a client whose request is on
// its way is not closed for a flood that came after it; 256 connections in all. What a waiting
// connection sends is read into its buffer (8 KiB at most): once its whole header has come it
// goes before half-sent ones, and at 256 connections these are closed before it; one that fills
// its buffer without the header's end is closed at once. Answers are
// bounded: one page at most 16 MiB, and 32 MiB of pages held at once for clients still reading
// them (past that, 503), so clients that never read cannot pin the daemon's memory; so is the
// time spent building pages (a quarter of the io thread: page_budget.hpp). It accepts as
// the control port does (common/accept_loop.hpp: out of descriptors it refuses pending connections
// at once and says so once). When a token is set, `Authorization: Bearer TOKEN` is required;
// without one, a Host that is not this machine's (host_header_allowed) is refused. The
// handler answers on the io thread. Owned by the rendezvous daemon; io_context thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/accept_loop.hpp"
#include "common/asio_clock.hpp"
#include "common/gate_keeper.hpp"
#include "observe/http_response.hpp"
#include "observe/page_budget.hpp"

namespace cohort::observe {

struct HttpOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;      ///< 0: any free port
  std::string token;      ///< non-empty: requests must carry it as a bearer token
  std::string host_name;  ///< this machine's, which a Host header may name; empty: gethostname
  /// Strangers are connections whose request has not come yet.
  ConnectionLimits limits{8, 64, 256, std::chrono::milliseconds(500)};
  size_t max_page_bytes = 16 << 20;          ///< a bigger answer is a 503
  size_t max_pending_bytes = 32 << 20;       ///< answers being sent, all connections together
  std::chrono::milliseconds timeout{10000};  ///< to send the request; then to read the answer
  /// Building pages may take this share of the io thread, and owe at most `page_time_limit` of
  /// it: past that, a request is answered 503 (page_budget.hpp).
  double page_time_share = 0.25;
  std::chrono::milliseconds page_time_limit{250};
};

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, HttpOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  boost::system::error_code start();
  uint16_t port() const { return accept_loop_.port(); }
  void stop();

 private:
  class Connection;
  /// What connections share with the server and may outlive it: after stop() they close
  /// instead of calling the handler.
  struct Shared {
    HttpOptions options;
    HttpHandler handler;
    uint64_t next_id = 1;
    std::map<uint64_t, std::weak_ptr<Connection>> strangers;   ///< by gate id: still reading
    std::map<uint64_t, std::shared_ptr<Connection>> waiting;   ///< by gate id: not read yet
    std::map<uint64_t, std::shared_ptr<Connection>> starting;  ///< let in, its watch not ended
    size_t pending_bytes = 0;                                  ///< the bodies of answers being sent
    PageBudget pages{options.page_time_limit, options.page_time_share};
    GateKeeper* gate = nullptr;  ///< the server's; none after stop()
    bool stopped() const { return gate == nullptr; }
  };
  void admit(boost::asio::ip::tcp::socket socket, const std::string& peer);
  void evict(uint64_t id);
  void start_stranger(uint64_t id);

  std::shared_ptr<Shared> shared_;
  AsioClock clock_;
  AcceptLoop accept_loop_;
  GateKeeper gate_keeper_;
};

/// Whether `authorization` (the header's value) is "Bearer TOKEN", the scheme in any case (RFC
/// 7235: "bearer", "BEARER"), the token compared exactly, through SHA-256 digests compared in
/// constant time (so that a wrong guess's timing shows neither the token's bytes nor its length).
bool bearer_matches(const std::string& authorization, const std::string& token);

/// Whether `authorization` is HTTP Basic whose password is TOKEN ("Basic " and the base64 of
/// "USER:TOKEN", any user name, the scheme in any case): what a browser's login dialog sends, so
/// that a person can open the pages of a daemon with a token. Compared in constant time.
bool basic_password_matches(const std::string& authorization, const std::string& token);

/// Whether a request's Host header (`host`, with its port if any) names this daemon as only its
/// own machine can: an IP address, localhost, or `own_name` (this host's name), in any case; or
/// no Host at all. A web page that rebound a name of its own to 127.0.0.1 (DNS rebinding) sends
/// that name: a daemon without a token answers it 421, so that no page reads its runs.
bool host_header_allowed(std::string_view host, std::string_view own_name);

}  // namespace cohort::observe
