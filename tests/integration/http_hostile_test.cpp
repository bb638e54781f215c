// cohortd's HTTP port against hostile clients, with real sockets: silent connections from one
// address cannot take every slot, oversized headers, a body, garbage and a request trickled a
// byte at a time are closed (the trickle at the request deadline, not later), thousands of
// quick connects are absorbed, a flood of half-sent requests from one address keeps no whole
// request from that address waiting, and out of descriptors the excess is refused at once;
// afterwards the daemon still answers /metrics and `cohort status`.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <thread>

#include "tests/integration/http_support.hpp"
#include "tests/integration/siege_support.hpp"
#include "tests/support/half_sent_flood.hpp"

using namespace cohort::test;

namespace {

using Clock = std::chrono::steady_clock;

// A TCP connection from `source` (a loopback address) to 127.0.0.1:`port`; closed with the guard.
class Connection {
 public:
  Connection(const std::string& source, int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  }
  ~Connection() { ::close(fd_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void send(const std::string& bytes) const {
    (void)!::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  /// Reads until the server closes; false if it is still open after `limit`. `got`: the bytes.
  bool closed_within(std::chrono::milliseconds limit, std::string* got = nullptr) const {
    auto deadline = Clock::now() + limit;
    char buffer[4096];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      pollfd ready{fd_, POLLIN, 0};
      if (::poll(&ready, 1, static_cast<int>(left.count())) <= 0) continue;
      ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) return true;  // EOF or reset
      if (got) got->append(buffer, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
};

int port_of(const std::string& url) { return std::atoi(url.substr(url.rfind(':') + 1).c_str()); }

}  // namespace

TEST_CASE("cohortd's HTTP port against hostile clients: nothing held, nothing crashes",
          "[integration][http][hostile]") {
  Scratch scratch;
  HttpCluster http(scratch);
  int port = port_of(http.url(""));

  // Eight silent connections from one address are all it may hold: a ninth makes the oldest
  // go, and /metrics from another address still answers.
  std::vector<std::unique_ptr<Connection>> silent;
  for (int i = 0; i < 8; ++i) silent.push_back(std::make_unique<Connection>("127.0.0.2", port));
  Connection ninth("127.0.0.2", port);
  CHECK(silent.front()->closed_within(2s));
  CHECK_FALSE(ninth.closed_within(200ms));
  auto asked = Clock::now();
  CHECK(http_status(http_get(http.url("/metrics"))) == 200);
  CHECK(Clock::now() - asked < 5s);  // answered, not after the held ones' 10 s deadline

  // A request trickled a byte every 400 ms is closed at the 10 s deadline from its connect.
  auto trickle_started = Clock::now();
  std::thread trickle([&] {
    Connection slow("127.0.0.3", port);
    std::string request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: ";
    for (size_t i = 0; i < 60; ++i) {
      slow.send(std::string(1, i < request.size() ? request[i] : 'a'));
      std::string got;
      if (slow.closed_within(400ms, &got)) {
        CHECK(got.find("200 OK") == std::string::npos);
        return;
      }
    }
    FAIL("a trickled request was not closed within 24 s");
  });

  // Headers over 8 KiB, a body, garbage: closed (or refused), never answered 200.
  struct Hostile {
    const char* what;
    std::string bytes;
  };
  std::vector<Hostile> hostile{
      {"oversized headers",
       "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n"},
      {"a POST with a body", "POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"},
      {"a GET with a body",
       "GET /metrics HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" + std::string(1000, 'b')},
      {"garbage", std::string(4096, '\x17') + "\r\n\r\n"},
      {"a request line of 100 KiB", "GET /" + std::string(100000, 'p') + " HTTP/1.1\r\n\r\n"},
      {"HTTP/0.9", "GET /metrics\r\n\r\n"},
  };
  for (const Hostile& each : hostile) {
    INFO(each.what);
    Connection connection("127.0.0.4", port);
    connection.send(each.bytes);
    std::string got;
    CHECK(connection.closed_within(5s, &got));
    CHECK(got.find("200 OK") == std::string::npos);
  }

  // Thousands of connects that say nothing and leave at once.
  for (int i = 0; i < 3000; ++i) Connection("127.0.0.5", port);

  trickle.join();
  CHECK(Clock::now() - trickle_started < 20s);
  silent.clear();

  // Still serving: /metrics, and the rendezvous itself.
  CHECK(http_status(http_get(http.url("/metrics"))) == 200);
  CHECK(daemon_status(http.cluster().endpoint()).runs.empty());
  CHECK(http.cluster().stop_daemon());
}

TEST_CASE("silent connections from 64 addresses keep no GET out of cohortd's HTTP port",
          "[integration][http][hostile]") {
  Scratch scratch;
  HttpCluster http(scratch);
  SilentSiege siege(port_of(http.url("")), 64, 2, 2);  // 128 strangers: twice the cap
  std::this_thread::sleep_for(500ms);
  // Each GET waits its turn behind the siege's newcomers (at most a grace or two), and is not
  // evicted for the ones after it however slowly its request is read.
  int answered = 0;
  for (int i = 0; i < 20; ++i) answered += http_status(http_get(http.url("/metrics"))) == 200;
  CHECK(answered == 20);
  CHECK(siege.reopened() > 0);  // the siege went on: strangers were evicted and came back
  CHECK(daemon_status(http.cluster().endpoint()).runs.empty());
  CHECK(http.cluster().stop_daemon());
}

TEST_CASE("cohortd without a token answers no web page that rebound its own name to loopback",
          "[integration][http][hostile][security]") {
  Scratch scratch;
  HttpCluster http(scratch);
  int port = port_of(http.url(""));
  Connection rebound("127.0.0.1", port);
  rebound.send("GET /api/runs HTTP/1.1\r\nHost: rebind.attacker.example:" + std::to_string(port) +
               "\r\n\r\n");
  std::string got;
  REQUIRE(rebound.closed_within(5s, &got));
  CHECK(got.rfind("HTTP/1.1 421", 0) == 0);
  CHECK(got.find("\"runs\"") == std::string::npos);
  CHECK(http_status(http_get(http.url("/api/runs"))) == 200);  // by its address, as ever
  CHECK(http.cluster().stop_daemon());
}

TEST_CASE(
    "half-sent requests from one address keep no whole GET from it waiting on cohortd's HTTP port",
    "[integration][http][hostile]") {
  Scratch scratch;
  HttpCluster http(scratch);
  int port = port_of(http.url(""));
  // 40 a second from 127.0.0.1, each a request line and no more: 8 start every 500 ms (the
  // grace), the rest wait, and within seconds they fill the 256 connections.
  HalfSentFlood flood(static_cast<uint16_t>(port));
  std::this_thread::sleep_for(1s);
  int answered = 0;
  for (int i = 0; i < 10; ++i) {  // a whole GET from the same address goes first
    Connection client("127.0.0.1", port);
    client.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    std::string got;
    answered += client.closed_within(3s, &got) && got.rfind("HTTP/1.1 200", 0) == 0;
  }
  CHECK(answered >= 9);
  CHECK(flood.sent() >= 40);
  CHECK(daemon_status(http.cluster().endpoint()).runs.empty());
  CHECK(http.cluster().stop_daemon());
}

TEST_CASE("cohortd's HTTP port out of descriptors refuses the excess at once then serves again",
          "[integration][http][hostile][fd-limit]") {
  Scratch scratch;
  ChildOptions options = scratch.options();
  options.name = "cohortd_http_fd";
  // A hard limit of 24 descriptors: a few dozen silent connections exhaust it.
  ChildProcess daemon({"/usr/bin/prlimit", "--nofile=24:24", kCohortdBin, "--port", "0",
                       "--http-port", "0", "--http-port-file", scratch.file("http_port")},
                      options);
  REQUIRE(wait_until([&] { return file_exists(scratch.file("http_port")); }, 10s));
  int port = std::atoi(read_file(scratch.file("http_port")).c_str());
  // One address each, 40 in all: under the caps on strangers, so none is evicted to make room.
  std::vector<std::unique_ptr<Connection>> flood;
  for (int i = 1; i <= 40; ++i)
    flood.push_back(std::make_unique<Connection>("127.0.3." + std::to_string(i), port));
  std::this_thread::sleep_for(1500ms);
  // Those past the limit were closed at once, not left in the listen queue; the rest are held,
  // unanswered, waiting for their request (10 s).
  int refused = 0, held = 0;
  for (auto& connection : flood) {
    if (connection->closed_within(50ms)) {
      ++refused;
    } else {
      ++held;
    }
  }
  CHECK(refused >= 10);
  CHECK(held >= 1);
  std::string err = daemon.err();
  INFO(err);
  int lines = 0;
  for (const auto& line : split_lines(err))
    lines += contains(line, "http: out of file descriptors");
  CHECK(lines == 1);  // once for the whole shortage
  CHECK(contains(err, "the open-file limit is 24; raise it with `ulimit -n`"));
  CHECK_FALSE(contains(err, "accept failed"));
  flood.clear();  // descriptors come free: /metrics answers again
  auto descriptors = [&] {
    return std::distance(
        std::filesystem::directory_iterator("/proc/" + std::to_string(daemon.pid()) + "/fd"),
        std::filesystem::directory_iterator());
  };
  CHECK(wait_until([&] { return descriptors() < 20; }, 5s));
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  CHECK(http_status(http_get(url)) == 200);
  CHECK(
      wait_until([&] { return contains(daemon.err(), "http: accepting connections again;"); }, 5s));
  daemon.signal(SIGTERM);
  CHECK(daemon.wait(10s));
}
