// observe::HttpServer on 127.0.0.1:0 with raw sockets: silent connections past the caps make
// room for newcomers (the oldest go, once their grace is over), and clients that never read their
// answers hold at most the send budget; past it a request is answered 503 at once, and the
// non-readers are closed at the answer's deadline; a request that has all come is served before,
// and evicted after, a flood of half-sent ones from its own address; a waiting header past the
// cap is closed at once; once the server and its io_context are gone, no connection is left open;
// requests that break HTTP's rules or the limits are answered 400, 431 or 413; every answer
// carries the headers that keep a browser from running, framing or sniffing anything.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <memory>
#include <thread>
#include <vector>

#include "observe/http_server.hpp"
#include "tests/support/half_sent_flood.hpp"

using namespace cohort;
using namespace std::chrono_literals;

namespace {

// The server on its own thread, answering every GET with a body of `body_bytes`.
struct ServerThread {
  boost::asio::io_context io;
  observe::HttpServer server;
  std::thread thread;

  ServerThread(observe::HttpOptions options, size_t body_bytes)
      : ServerThread(std::move(options), [body_bytes](const std::string&) {
          return observe::HttpResponse{200, "text/plain", std::string(body_bytes, 'p')};
        }) {}
  ServerThread(observe::HttpOptions options, observe::HttpHandler handler)
      : server(io, std::move(options), std::move(handler)) {
    REQUIRE_FALSE(server.start());
    thread = std::thread([this] { io.run(); });
  }
  ~ServerThread() {
    boost::asio::post(io, [this] {
      server.stop();
      io.stop();
    });
    thread.join();
  }
};

// A blocking TCP connection from `source` with a small receive buffer; closed with the object.
class Peer {
 public:
  Peer(const std::string& source, uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    int small = 4096;  // little kernel buffering: an unread answer stays with the server
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  }
  ~Peer() { ::close(fd_); }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  void get() const {
    std::string request = "GET /page HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    REQUIRE(::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size()));
  }
  void send(const std::string& text) const {
    REQUIRE(::send(fd_, text.data(), text.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(text.size()));
  }
  /// Sends `text` and shuts this side: the server reads it, then end of file.
  void send_and_shut(const std::string& text) const {
    send(text);
    REQUIRE(::shutdown(fd_, SHUT_WR) == 0);
  }
  /// The first `bytes` the server sent (fewer if it closed first, or after `silence`).
  std::string read_some(size_t bytes, std::chrono::milliseconds silence = 5s) const {
    std::string got;
    char buffer[4096];
    while (got.size() < bytes) {
      pollfd ready{fd_, POLLIN, 0};
      if (::poll(&ready, 1, static_cast<int>(silence.count())) <= 0) break;
      ssize_t n = ::recv(fd_, buffer, std::min(sizeof buffer, bytes - got.size()), 0);
      if (n <= 0) break;
      got.append(buffer, static_cast<size_t>(n));
    }
    return got;
  }
  /// Reads until the server closes: true if it did within `limit`.
  bool closed_within(std::chrono::milliseconds limit) const {
    auto deadline = std::chrono::steady_clock::now() + limit;
    char buffer[65536];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd ready{fd_, POLLIN, 0};
      if (::poll(&ready, 1, 100) <= 0) continue;
      if (::recv(fd_, buffer, sizeof buffer, 0) <= 0) return true;
    }
    return false;
  }

 private:
  int fd_;
};

}  // namespace

TEST_CASE("HTTP: past the caps on silent connections the oldest make room for a request",
          "[component][http]") {
  observe::HttpOptions options;
  options.limits = {2, 3, 100};
  ServerThread s(options, 10);
  uint16_t port = s.server.port();
  std::vector<std::unique_ptr<Peer>> silent;
  for (const char* from : {"127.0.0.2", "127.0.0.3", "127.0.0.4"})
    silent.push_back(std::make_unique<Peer>(from, port));
  Peer same("127.0.0.2", port);  // three strangers in all already: the oldest, .2's, goes
  CHECK(silent[0]->closed_within(5s));
  same.get();
  CHECK(same.read_some(12) == "HTTP/1.1 200");
  Peer a("127.0.0.5", port), b("127.0.0.5", port), c("127.0.0.5", port);  // 2 per address
  CHECK(a.closed_within(5s));
  c.get();
  CHECK(c.read_some(12) == "HTTP/1.1 200");
}

TEST_CASE("HTTP: with a grace a young silent connection keeps its place and a request waits",
          "[component][http]") {
  observe::HttpOptions options;
  options.limits = {8, 3, 100, 1000ms};
  ServerThread s(options, 10);
  uint16_t port = s.server.port();
  std::vector<std::unique_ptr<Peer>> silent;
  for (const char* from : {"127.0.0.2", "127.0.0.3", "127.0.0.4"})
    silent.push_back(std::make_unique<Peer>(from, port));
  auto asked = std::chrono::steady_clock::now();
  Peer request("127.0.0.5", port);  // past the cap of 3, all young: waits unread
  request.get();
  CHECK_FALSE(silent[0]->closed_within(300ms));    // in its grace: not evicted for a newcomer
  CHECK(request.read_some(12) == "HTTP/1.1 200");  // then the oldest makes room
  CHECK(std::chrono::steady_clock::now() - asked >= 900ms);
  CHECK(silent[0]->closed_within(1s));
  CHECK_FALSE(silent[1]->closed_within(100ms));  // no one else waited: the others stay
}

TEST_CASE("HTTP: clients that never read hold at most the send budget, then are closed",
          "[component][http]") {
  observe::HttpOptions options;
  options.max_page_bytes = 16 << 20;
  options.max_pending_bytes = 20 << 20;
  options.timeout = 2000ms;
  ServerThread s(options, 8 << 20);  // more than the kernel buffers of one connection
  uint16_t port = s.server.port();
  Peer first("127.0.0.2", port), second("127.0.0.3", port);
  first.get();
  second.get();
  CHECK(first.read_some(12) == "HTTP/1.1 200");
  CHECK(second.read_some(12) == "HTTP/1.1 200");
  Peer third("127.0.0.4", port);  // 16 MiB of answers still unread: 8 more is over 20
  third.get();
  std::string busy = third.read_some(4096);
  CHECK(busy.rfind("HTTP/1.1 503", 0) == 0);
  CHECK(busy.find("busy") != std::string::npos);
  // Neither reads on: the answers' deadline (2 s) closes both and frees the budget, so a later
  // request is answered again (asked every 200 ms, for at most 10 s).
  std::string answer;
  for (int i = 0; i < 50 && answer != "HTTP/1.1 200"; ++i) {
    std::this_thread::sleep_for(200ms);
    Peer fourth("127.0.0.4", port);
    fourth.get();
    answer = fourth.read_some(12);
  }
  CHECK(answer == "HTTP/1.1 200");
  CHECK(first.closed_within(10s));
  CHECK(second.closed_within(10s));
}

TEST_CASE("HTTP: a page over the page limit is a 503, not a held answer", "[component][http]") {
  observe::HttpOptions options;
  options.max_page_bytes = 1 << 20;
  ServerThread s(options, 2 << 20);
  Peer peer("127.0.0.2", s.server.port());
  peer.get();
  std::string answer = peer.read_some(4096);
  CHECK(answer.rfind("HTTP/1.1 503", 0) == 0);
  CHECK(answer.find("over the limit of 1048576") != std::string::npos);
}

TEST_CASE("HTTP: without a token a name that is not this machine's is refused (DNS rebinding)",
          "[component][http]") {
  observe::HttpOptions options;
  options.host_name = "node7";
  ServerThread s(options, 10);
  auto answer_to = [&](const std::string& request) {
    Peer peer("127.0.0.1", s.server.port());
    peer.send(request);
    return peer.read_some(4096);
  };
  std::string rebound = answer_to("GET /api/runs HTTP/1.1\r\nHost: attacker.example:80\r\n\r\n");
  CHECK(rebound.rfind("HTTP/1.1 421", 0) == 0);
  CHECK(rebound.find("not of 'attacker.example:80'") != std::string::npos);
  CHECK(rebound.find("pppppppppp") == std::string::npos);
  for (const char* host : {"127.0.0.1:1", "localhost", "node7:9090"}) {
    INFO(host);
    CHECK(answer_to(std::string("GET / HTTP/1.1\r\nHost: ") + host + "\r\n\r\n")
              .rfind("HTTP/1.1 200", 0) == 0);
  }
  CHECK(answer_to("GET / HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 200", 0) == 0);

  // With a token the page cannot send, any name may be used (an admin's DNS alias).
  options.token = "0123456789abcdef";
  ServerThread with_token(options, 10);
  Peer peer("127.0.0.1", with_token.server.port());
  peer.send(
      "GET / HTTP/1.1\r\nHost: dashboards.example\r\nAuthorization: Bearer "
      "0123456789abcdef\r\n\r\n");
  CHECK(peer.read_some(4096).rfind("HTTP/1.1 200", 0) == 0);
}

TEST_CASE("HTTP: a request that breaks HTTP's rules or the limits is answered 400, 431 or 413",
          "[component][http]") {
  // Each used to be closed without a word (curl: "Empty reply from server").
  ServerThread s(observe::HttpOptions{}, 10);
  auto answer_to = [&](const std::string& request) {
    Peer peer("127.0.0.1", s.server.port());
    peer.send(request);
    return peer.read_some(4096);
  };
  std::string malformed = answer_to("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nno colon\r\n\r\n");
  CHECK(malformed.rfind("HTTP/1.1 400", 0) == 0);
  CHECK(malformed.find("not a request this server reads") != std::string::npos);
  // 12 KiB of header sent whole: the answer arrives although most of it was never read.
  std::string oversized = answer_to(
      "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: " + std::string(12000, 'x') + "\r\n\r\n");
  CHECK(oversized.rfind("HTTP/1.1 431", 0) == 0);
  CHECK(oversized.find("at most 8192 bytes") != std::string::npos);
  std::string bodied =
      answer_to("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello");
  CHECK(bodied.rfind("HTTP/1.1 413", 0) == 0);
  CHECK(answer_to("PUT / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").rfind("HTTP/1.1 405", 0) == 0);
  for (const std::string& answer : {malformed, oversized, bodied}) {
    CHECK(answer.find("Connection: close") != std::string::npos);
    CHECK(answer.find("pppppppppp") == std::string::npos);
  }
}

TEST_CASE("HTTP: every answer forbids scripts, framing and sniffing", "[component][http]") {
  ServerThread s(observe::HttpOptions{}, 10);
  Peer peer("127.0.0.1", s.server.port());
  peer.get();
  std::string answer = peer.read_some(4096);
  CHECK(answer.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(answer.find("\r\nContent-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; "
                    "frame-ancestors 'none'") != std::string::npos);
  CHECK(answer.find("\r\nX-Content-Type-Options: nosniff\r\n") != std::string::npos);
  CHECK(answer.find("\r\nX-Frame-Options: DENY\r\n") != std::string::npos);
  CHECK(answer.find("\r\nReferrer-Policy: no-referrer\r\n") != std::string::npos);
}

TEST_CASE("HTTP: with a token a browser is asked for it and its Basic login is let in",
          "[component][http]") {
  observe::HttpOptions options;
  options.token = "0123456789abcdef";
  ServerThread s(options, 10);
  auto answer_to = [&](const std::string& authorization) {
    Peer peer("127.0.0.1", s.server.port());
    peer.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + authorization + "\r\n");
    return peer.read_some(4096);
  };
  std::string asked = answer_to("");
  CHECK(asked.rfind("HTTP/1.1 401", 0) == 0);
  CHECK(asked.find("\r\nWWW-Authenticate: Bearer\r\n") != std::string::npos);
  CHECK(asked.find("\r\nWWW-Authenticate: Basic realm=\"cohortd\", charset=\"UTF-8\"\r\n") !=
        std::string::npos);
  CHECK(asked.find("pppppppppp") == std::string::npos);
  // base64("me:0123456789abcdef"), and the same with a wrong last character.
  CHECK(
      answer_to("Authorization: Basic bWU6MDEyMzQ1Njc4OWFiY2RlZg==\r\n").rfind("HTTP/1.1 200", 0) ==
      0);
  CHECK(
      answer_to("Authorization: Basic bWU6MDEyMzQ1Njc4OWFiY2RlZQ==\r\n").rfind("HTTP/1.1 401", 0) ==
      0);
  CHECK(answer_to("Authorization: Bearer 0123456789abcdef\r\n").rfind("HTTP/1.1 200", 0) == 0);
}

TEST_CASE("HTTP: pages that take long to build get their share of the io thread, then 503s",
          "[component][http]") {
  // A run's page of 10,000 events took up to half a second on the thread that answers the runs'
  // heartbeats; clients asking for it in a loop held that thread.
  ServerThread s(observe::HttpOptions{}, [](const std::string&) {
    std::this_thread::sleep_for(300ms);
    return observe::HttpResponse{200, "text/plain", "big page"};
  });
  int built = 0, busy = 0;
  auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 6; ++i) {
    Peer peer("127.0.0.1", s.server.port());
    peer.get();
    std::string answer = peer.read_some(4096);
    built += answer.rfind("HTTP/1.1 200", 0) == 0;
    if (answer.rfind("HTTP/1.1 503", 0) == 0) {
      ++busy;
      CHECK(answer.find("Retry-After: 1") != std::string::npos);
    }
  }
  CHECK(built + busy == 6);
  CHECK(built <= 3);  // a quarter of the time, and 250 ms owed at most
  CHECK(busy >= 3);
  CHECK(std::chrono::steady_clock::now() - started < 2s);
  std::this_thread::sleep_for(2s);  // the debt paid: built again
  Peer later("127.0.0.1", s.server.port());
  later.get();
  CHECK(later.read_some(4096).rfind("HTTP/1.1 200", 0) == 0);
}

TEST_CASE("HTTP: a flood of half-sent requests from one address keeps no whole request waiting",
          "[component][http]") {
  // The daemon's limits: 8 strangers per address, each safe for 500 ms. The flood (40 a second)
  // starts 8 every 500 ms and the rest wait; a whole request from the same address goes before
  // them, and at the cap on connections they are closed before it.
  ServerThread s(observe::HttpOptions{}, 10);
  uint16_t port = s.server.port();
  test::HalfSentFlood flood(port, "GET /page HTTP/1.1\r\n");
  std::this_thread::sleep_for(1s);
  int answered = 0;
  for (int i = 0; i < 10; ++i) {
    Peer client("127.0.0.1", port);
    client.get();
    answered += client.read_some(12, 3s) == "HTTP/1.1 200";
  }
  CHECK(answered >= 9);
  CHECK(flood.sent() >= 40);
}

TEST_CASE("HTTP: at the cap on connections half-sent requests are closed before a whole one",
          "[component][http]") {
  // 16 connections at most and a grace of 2 s: the flood fills the cap within a second, then
  // each newcomer closes the oldest waiting connection that has not sent its whole request.
  observe::HttpOptions options;
  options.limits = {8, 64, 16, 2000ms};
  ServerThread s(options, 10);
  uint16_t port = s.server.port();
  test::HalfSentFlood flood(port, "GET /page HTTP/1.1\r\n");
  std::this_thread::sleep_for(1s);
  int answered = 0;
  for (int i = 0; i < 3; ++i) {
    Peer client("127.0.0.1", port);
    client.get();
    answered += client.read_some(12, 4s) == "HTTP/1.1 200";
  }
  CHECK(answered == 3);
  CHECK(flood.sent() >= 40);
}

// CPU time of this whole process (the server's thread, mostly, while the test sleeps).
std::chrono::nanoseconds process_cpu_time() {
  timespec now{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

TEST_CASE("HTTP: waiting connections with half a request or a shut side do not spin the io thread",
          "[component][http]") {
  // Two silent strangers hold 127.0.0.2's places for 3 s; a third sends half a request and shuts
  // its side, so its socket stays readable while it waits: it can never be served, and is closed
  // at once (it once waited for its turn, then for its deadline, 10 s, whenever the server had
  // seen its end of file before the event that told of it). A fourth sends half a request: it is
  // watched, and wakes the server only when more comes.
  observe::HttpOptions options;
  options.limits = {2, 64, 256, 3000ms};
  ServerThread s(options, 10);
  uint16_t port = s.server.port();
  Peer first("127.0.0.2", port), second("127.0.0.2", port);
  Peer half("127.0.0.2", port), open("127.0.0.2", port);
  half.send_and_shut("GET /page HTTP/1.1\r\n");
  open.send("GET /page HTTP/1.1\r\n");  // half a request, unread: waits for more
  std::this_thread::sleep_for(100ms);
  auto before = process_cpu_time();
  std::this_thread::sleep_for(1s);
  CHECK(process_cpu_time() - before < 100ms);  // a spinning io thread takes the whole second
  CHECK(half.closed_within(1500ms));           // before the strangers' grace ends
  CHECK(open.closed_within(100ms) == false);
}

TEST_CASE("HTTP: a waiting connection that sends a header past the cap is closed at once",
          "[component][http]") {
  // Two silent strangers hold 127.0.0.3's places for 3 s; a third, waiting behind them, sends
  // 9 KiB with no end of header: it can never be served, so it does not wait for its turn.
  observe::HttpOptions options;
  options.limits = {2, 64, 256, 3000ms};
  ServerThread s(options, 10);
  uint16_t port = s.server.port();
  Peer first("127.0.0.3", port), second("127.0.0.3", port), oversized("127.0.0.3", port);
  oversized.send("GET /page HTTP/1.1\r\nX-Long: " + std::string(9000, 'x'));
  CHECK(oversized.closed_within(1500ms));  // before the strangers' grace ends
  Peer whole("127.0.0.3", port);           // its place is free again: a request still waits
  whole.get();
  CHECK(whole.read_some(12).substr(0, 12) == "HTTP/1.1 200");
}

TEST_CASE("HTTP: a connection let in while it was watched is closed when the server goes",
          "[component][http]") {
  // One stranger per address: `second` waits, watched, until `first`'s request comes; the gate
  // then lets it in at once, and the handler stops the io before the watch has ended. Destroying
  // the server and its io_context must close `second`: nothing may keep it alive.
  observe::HttpOptions options;
  options.limits = {1, 64, 256, 60000ms};
  auto io = std::make_unique<boost::asio::io_context>();
  auto server =
      std::make_unique<observe::HttpServer>(*io, options, [raw = io.get()](const std::string&) {
        raw->stop();
        return observe::HttpResponse{200, "text/plain", "stopped"};
      });
  REQUIRE_FALSE(server->start());
  std::thread thread([raw = io.get()] { raw->run(); });
  Peer first("127.0.0.6", server->port()), second("127.0.0.6", server->port());
  std::this_thread::sleep_for(200ms);  // both accepted: `second` waits for `first`'s place
  first.get();
  thread.join();
  server.reset();
  io.reset();
  CHECK(second.closed_within(2s));
}
