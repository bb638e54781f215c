#include "observe/http_server.hpp"

#include <unistd.h>
#include <boost/algorithm/string/predicate.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <string_view>

#include "common/host_port.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "proto/auth.hpp"

namespace cohort::observe {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using boost::asio::ip::tcp;

namespace {

constexpr size_t kMaxHeaderBytes = 8 * 1024;

HttpResponse plain(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", body};
}

HttpOptions with_host_name(HttpOptions options) {
  if (!options.host_name.empty()) return options;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0) options.host_name = name;
  return options;
}

}  // namespace

bool bearer_matches(const std::string& authorization, const std::string& token) {
  const std::string prefix = "bearer ";  // the scheme in any case (RFC 7235), then the token
  if (authorization.size() < prefix.size() ||
      !boost::algorithm::iequals(std::string_view(authorization).substr(0, prefix.size()), prefix))
    return false;
  // Digests of equal length compared in constant time: neither the token's bytes nor its length
  // show in how long a wrong guess takes.
  return proto::proofs_equal(
      proto::sha256_hex(std::string_view(authorization).substr(prefix.size())),
      proto::sha256_hex(token));
}

bool basic_password_matches(const std::string& authorization, const std::string& token) {
  const std::string prefix = "basic ";
  if (authorization.size() <= prefix.size() ||
      !boost::algorithm::iequals(authorization.substr(0, prefix.size()), prefix)) {
    return false;
  }
  std::string_view encoded = std::string_view(authorization).substr(prefix.size());
  for (int pad = 0; pad < 2 && !encoded.empty() && encoded.back() == '='; ++pad)
    encoded.remove_suffix(1);
  std::string decoded((encoded.size() + 3) / 4 * 3, '\0');  // padding stripped: round up
  auto [written, read] =
      beast::detail::base64::decode(decoded.data(), encoded.data(), encoded.size());
  if (read != encoded.size()) return false;  // not base64 through to its padding
  decoded.resize(written);
  size_t colon = decoded.find(':');
  if (colon == std::string::npos) return false;
  return bearer_matches("Bearer " + decoded.substr(colon + 1), token);
}

bool host_header_allowed(std::string_view host, std::string_view own_name) {
  if (host.empty()) return true;  // HTTP/1.0, or a client of no browser
  std::string name;
  if (host.front() == '[') {  // "[::1]:8080"
    size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    name = std::string(host.substr(1, close - 1));
  } else {
    name = std::string(host.substr(0, host.rfind(':')));
  }
  if (!name.empty() && name.back() == '.') name.pop_back();  // "localhost."
  return is_ip_address(name) || boost::algorithm::iequals(name, "localhost") ||
         (!own_name.empty() && boost::algorithm::iequals(name, own_name));
}

// One accepted connection: reads one request, writes one response, closes. Holds itself alive
// through its handlers' shared_ptr (the server's `waiting` holds it until it starts, `starting`
// from then until its watch ends: never itself, so that stop() lets every one go); counts
// itself at the server's gate (a stranger until its request has come, ready while it waits once
// its whole header has come) and its answer's body in the server's pending bytes.
class HttpServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, uint64_t id, std::shared_ptr<Shared> shared)
      : stream_(std::move(socket)), id_(id), shared_(std::move(shared)) {
    parser_.header_limit(kMaxHeaderBytes);
    parser_.body_limit(0);
  }
  ~Connection() {
    shared_->strangers.erase(id_);
    shared_->pending_bytes -= held_bytes_;
    if (shared_->gate) shared_->gate->closed(id_);
  }

  /// While it waits: reads what comes into its buffer (up to the header cap; the parser starts
  /// from there) and tells the gate once the whole header is in, so that it starts before
  /// half-sent requests. Those that can never be served are closed at once, where they would
  /// have held their place until their turn: a full buffer without the header's end, and one
  /// whose client shut its side (or that failed) before the header's end. The latter is not
  /// read again once started: Asio waits for the next readiness of a socket whose end of file it
  /// has read, which never comes, so it would stay open until its deadline.
  void watch() {
    if (started_ || shared_->stopped()) return;
    size_t room = kMaxHeaderBytes - buffer_.size();
    if (room == 0) {
      shared_->waiting.erase(id_);  // closes once the caller lets it go
      return;
    }
    watching_ = true;
    stream_.socket().async_read_some(
        buffer_.prepare(room), [weak = weak_from_this()](beast::error_code error, size_t got) {
          auto self = weak.lock();
          if (!self) return;  // closed while it waited
          self->watching_ = false;
          self->buffer_.commit(got);
          bool ended = error && error != boost::asio::error::operation_aborted;
          if (self->started_) {
            self->shared_->starting.erase(self->id_);  // `self` holds it now
            if (ended) return self->close();
            return self->read_request(self);
          }
          if (self->shared_->stopped()) return;
          if (ended) {
            self->shared_->waiting.erase(self->id_);  // closes once `self` lets it go
            return;
          }
          if (self->whole_header()) return self->shared_->gate->ready(self->id_);
          self->watch();
        });
  }

  /// Its turn: reads the request (after what watch() read), with the server's deadline.
  void start() {
    started_ = true;
    if (!watching_) return read_request(shared_from_this());
    shared_->starting[id_] = shared_from_this();  // the watch holds it weakly
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
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
    bool head = request.method() == http::verb::head;
    send(within_budget(answer_for(request)), head);
  }

  // Writes `answer` (its body left out for a HEAD request), then closes.
  void send(HttpResponse answer, bool head) {
    response_.result(static_cast<http::status>(answer.status));
    response_.version(11);
    response_.set(http::field::server, "cohortd");
    response_.set(http::field::content_type, answer.content_type);
    response_.set(http::field::cache_control, "no-store");
    response_.set(http::field::connection, "close");
    // The pages run no script, load nothing and are framed by no one; nothing is sniffed.
    response_.set("Content-Security-Policy",
                  "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; "
                  "base-uri 'none'; form-action 'none'");
    response_.set("X-Content-Type-Options", "nosniff");
    response_.set("X-Frame-Options", "DENY");
    response_.set("Referrer-Policy", "no-referrer");
    if (answer.status == 401) {  // a program sends the token as a bearer, a browser asks for it
      response_.insert(http::field::www_authenticate, "Bearer");
      response_.insert(http::field::www_authenticate, "Basic realm=\"cohortd\", charset=\"UTF-8\"");
    }
    if (answer.status == 503) response_.set(http::field::retry_after, "1");
    response_.body() = head ? "" : std::move(answer.body);
    response_.prepare_payload();
    if (head) response_.content_length(answer.body.size());
    held_bytes_ = response_.body().size();
    shared_->pending_bytes += held_bytes_;
    stream_.expires_after(shared_->options.timeout);  // a client that never reads is closed
    http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code, size_t) {
      if (self->linger_) return self->drain();
      self->close();
    });
  }

  // After refusing a request that was not read to its end: stops sending, then reads (and drops)
  // what the client still sends, for a short while, before closing. Closed at once, the unread
  // bytes would reset the connection, which can discard the answer before the client reads it.
  void drain() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    if (drained_ == 0) stream_.expires_after(std::chrono::seconds(1));
    if (drained_ > 64 * 1024) return close();
    stream_.async_read_some(boost::asio::buffer(discard_),
                            [self = shared_from_this()](beast::error_code error, size_t got) {
                              self->drained_ += got + 1;
                              if (error) return self->close();
                              self->drain();
                            });
  }

  // A request that could not be read whole is answered when it broke HTTP's rules or this
  // server's limits; one cut short by its client or by the deadline is only closed.
  void refuse_unreadable(const beast::error_code& error) {
    if (error.category() != http::make_error_code(http::error::bad_method).category() ||
        error == http::error::end_of_stream || error == http::error::partial_message) {
      return close();
    }
    linger_ = true;
    if (error == http::error::header_limit || error == http::error::buffer_overflow) {
      return send(
          plain(431, cat("a request's header may be at most ", kMaxHeaderBytes, " bytes\n")),
          false);
    }
    if (error == http::error::body_limit)
      return send(plain(413, "a request here has no body (GET and HEAD only)\n"), false);
    send(plain(400, cat("not a request this server reads: ", error.message(), "\n")), false);
  }

  void read_request(std::shared_ptr<Connection> self) {
    stream_.expires_at(accepted_ + shared_->options.timeout);  // from its connect, waits included
    http::async_read(stream_, buffer_, parser_,
                     [self = std::move(self)](beast::error_code error, size_t) {
                       if (self->shared_->stopped()) return self->close();
                       if (error) return self->refuse_unreadable(error);
                       self->shared_->strangers.erase(self->id_);  // its request came
                       self->shared_->gate->proven(self->id_);
                       self->respond();
                     });
  }

  bool whole_header() const {
    std::string_view got(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    return got.find("\r\n\r\n") != std::string_view::npos;
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

  HttpResponse answer_for(const http::request<http::empty_body>& request) {
    if (request.method() != http::verb::get && request.method() != http::verb::head)
      return plain(405, "only GET and HEAD\n");
    const std::string& token = shared_->options.token;
    std::string authorization(request[http::field::authorization]);
    if (!token.empty() && !bearer_matches(authorization, token) &&
        !basic_password_matches(authorization, token)) {
      return plain(401,
                   "this daemon has a token: send it as 'Authorization: Bearer TOKEN' (or, in a "
                   "browser, give it as the password, any user name)\n");
    }
    std::string_view host(request[http::field::host]);
    if (token.empty() && !host_header_allowed(host, shared_->options.host_name)) {
      return plain(421, cat("this daemon has no token: it answers pages asked of an address, "
                            "localhost or ",
                            shared_->options.host_name, ", not of '",
                            escape_for_terminal(one_line(host.substr(0, 256))), "'\n"));
    }
    // Built on the io thread, which also answers the runs' heartbeats: within the budget only.
    auto start = std::chrono::steady_clock::now();
    if (!shared_->pages.allows(start)) {
      return plain(503,
                   "busy: building pages took this daemon's share of time for them; try "
                   "again\n");
    }
    HttpResponse answer = shared_->handler(std::string(request.target()));
    shared_->pages.spent(start, std::chrono::steady_clock::now());
    return answer;
  }

  beast::tcp_stream stream_;
  std::chrono::steady_clock::time_point accepted_ = std::chrono::steady_clock::now();
  uint64_t id_;
  bool started_ = false;   ///< its turn came: reading its request, or done
  bool watching_ = false;  ///< watch()'s read is pending
  size_t held_bytes_ = 0;
  bool linger_ = false;  ///< its request was refused unread: drain() before closing
  size_t drained_ = 0;   ///< bytes (and reads) drain() has dropped
  char discard_[4096];
  beast::flat_buffer buffer_{kMaxHeaderBytes};
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> response_;
  std::shared_ptr<Shared> shared_;
};

HttpServer::HttpServer(boost::asio::io_context& io, HttpOptions options, HttpHandler handler)
    : shared_(
          std::make_shared<Shared>(Shared{with_host_name(std::move(options)), std::move(handler)})),
      clock_(io),
      accept_loop_(
          io, clock_, "http",
          [this](tcp::socket socket, const std::string& peer) { admit(std::move(socket), peer); }),
      gate_keeper_(
          shared_->options.limits, clock_, [this](uint64_t id, const std::string&) { evict(id); },
          [this](uint64_t id) { start_stranger(id); }) {
  shared_->gate = &gate_keeper_;
}

HttpServer::~HttpServer() { stop(); }

boost::system::error_code HttpServer::start() {
  const HttpOptions& options = shared_->options;
  if (auto error = accept_loop_.open(options.address, options.port,
                                     boost::asio::socket_base::max_listen_connections)) {
    return error;
  }
  accept_loop_.start();
  return {};
}

void HttpServer::stop() {
  if (shared_->stopped()) return;
  shared_->gate = nullptr;     // connections may outlive the server
  shared_->handler = nullptr;  // it may point into the owner, which is going away
  accept_loop_.close();
  gate_keeper_.close();
  shared_->waiting.clear();  // never read: closed as they go
  shared_->starting.clear();
}

// Past a cap the newcomer waits, unread, until a stranger answers, closes or has had its grace;
// then the oldest such makes room (common/connection_gate.hpp), for the oldest waiting connection
// whose whole header has come if any, else for the oldest waiting. Refused only at the cap on
// connections with no stranger overdue and none waiting.
void HttpServer::admit(tcp::socket socket, const std::string& peer) {
  Shared& shared = *shared_;
  uint64_t id = shared.next_id++;
  Admission admission = gate_keeper_.admit(id, peer);
  if (!admission.refusal.empty()) {
    boost::system::error_code ignored;
    socket.close(ignored);
    return;
  }
  auto connection = std::make_shared<Connection>(std::move(socket), id, shared_);
  shared.waiting[id] = connection;
  gate_keeper_.let_in(std::move(admission));
  if (shared.waiting.count(id) > 0) connection->watch();
}

// A stranger that makes room for a newcomer, or at the cap on connections one still waiting:
// closed at once.
void HttpServer::evict(uint64_t id) {
  shared_->waiting.erase(id);
  auto found = shared_->strangers.find(id);
  if (found == shared_->strangers.end()) return;
  if (auto stranger = found->second.lock()) stranger->close();
  shared_->strangers.erase(found);
}

void HttpServer::start_stranger(uint64_t id) {
  auto found = shared_->waiting.find(id);
  if (found == shared_->waiting.end()) return;
  std::shared_ptr<Connection> connection = std::move(found->second);
  shared_->waiting.erase(found);
  shared_->strangers[id] = connection;
  connection->start();
}

}  // namespace cohort::observe
