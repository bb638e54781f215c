#include <arpa/inet.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/byte_budget.hpp"
#include "common/console.hpp"
#include "common/io_pool.hpp"
#include "common/text.hpp"
#include "common/uring_loop.hpp"
#include "store/store.hpp"
#include "store/store_server.hpp"
#include "store/store_service.hpp"
#include "store/tcpstore_codec.hpp"
#include "store/tcpstore_limits.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_paths.hpp"
#include "tests/support/wait_until.hpp"
#include "tests/support/wire_bytes.hpp"

using namespace cohort;
using namespace cohort::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

std::string request(StoreOp op, std::vector<std::string> keys = {},
                    std::vector<std::string> values = {}, int64_t number = 0,
                    StoreNumbering numbering = StoreNumbering::Legacy113) {
  std::string out;
  REQUIRE(
      append_request(out, StoreRequest{op, std::move(keys), std::move(values), number}, numbering));
  return out;
}

std::string validated(StoreOp op, std::vector<std::string> keys = {},
                      std::vector<std::string> values = {}, int64_t number = 0) {
  return request(op, std::move(keys), std::move(values), number, StoreNumbering::Validated);
}

// The io threads ServerThread's connections are spread over: COHORT_TEST_STORE_THREADS (ctest
// runs these cases with 1 and with 3), the server's own thread included.
int store_threads() {
  const char* threads = std::getenv("COHORT_TEST_STORE_THREADS");
  return threads != nullptr ? std::max(1, std::atoi(threads)) : 1;
}

// How ServerThread's pool reads and writes: COHORT_TEST_STORE_IO=io_uring (ctest runs the store's
// cases once more so) or epoll.
SocketIo store_io() {
  const char* io = std::getenv("COHORT_TEST_STORE_IO");
  return io != nullptr && std::string_view(io) == "io_uring" ? SocketIo::IoUring : SocketIo::Epoll;
}

// The pool of a ServerThread: none with one epoll thread (the server's own context serves).
std::unique_ptr<IoPool> test_pool(asio::io_context& io) {
  if (store_threads() == 1 && store_io() == SocketIo::Epoll) return nullptr;
  auto pool = std::make_unique<IoPool>(io, store_threads(), store_io());
  pool->set_ring_after(0);  // every connection on the ring from its first request
  if (store_io() == SocketIo::IoUring && !pool->uses_io_uring()) {
    WARN("io_uring is not usable here (" << pool->io_uring_unavailable()
                                         << "): these cases ran through epoll");
  }
  return pool;
}

StoreServerOptions with_pool(StoreServerOptions options, IoPool* pool) {
  options.io_pool = pool;
  return options;
}

// A StoreServer in its own io_context, run by a thread, as a host component would run it; with
// store_threads() > 1 its connections are served on an IoPool's threads too, and with
// store_io() io_uring through the pool's rings.
class ServerThread {
 public:
  explicit ServerThread(StoreServerOptions options = {})
      : pool_(test_pool(io_)), server_(io_, with_pool(std::move(options), pool_.get())) {}
  ~ServerThread() { stop(); }

  boost::system::error_code start() {
    auto error = server_.start();
    if (!error) thread_ = std::thread([this] { io_.run(); });
    return error;
  }
  void stop() {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
      server_.stop();
      io_.stop();
    });
    thread_.join();
  }
  uint16_t port() const { return server_.port(); }
  size_t connections() const { return server_.connection_count(); }
  /// Runs `action` on the io thread and waits for it.
  template <typename Action>
  auto on_io(Action action) {
    std::packaged_task<decltype(action())()> task(action);
    auto result = task.get_future();
    asio::post(io_, [&task] { task(); });
    return result.get();
  }
  size_t num_keys() {
    size_t keys = 0;
    server_.read_store([&](const Store& store) { keys = store.num_keys(); });
    return keys;
  }
  /// What the quota counts for keys, values and registrations.
  uint64_t used_bytes() {
    uint64_t bytes = 0;
    server_.read_store([&](const Store& store) { bytes = store.used_bytes(); });
    return bytes;
  }
  /// What requests still arriving have charged against the quota.
  uint64_t held_bytes() {
    uint64_t bytes = 0;
    server_.read_store([&](const Store& store) { bytes = store.held_bytes(); });
    return bytes;
  }
  void allow(std::optional<std::vector<asio::ip::address>> peers) {
    on_io([&] { server_.set_allowed_peers(peers); });
  }
  /// CPU time the server's thread has used so far (its own thread only, not the pool's).
  std::chrono::milliseconds cpu_time() {
    clockid_t clock;
    REQUIRE(::pthread_getcpuclockid(thread_.native_handle(), &clock) == 0);
    timespec used{};
    ::clock_gettime(clock, &used);
    return std::chrono::milliseconds(used.tv_sec * 1000 + used.tv_nsec / 1000000);
  }

 private:
  asio::io_context io_;
  std::unique_ptr<IoPool> pool_;
  StoreServer server_;
  std::thread thread_;
};

// A blocking client socket that sends exact bytes and reads exact replies, with deadlines.
class RawClient {
 public:
  /// `from`: an IPv4 address to bind to before connecting (nullptr: the kernel's choice).
  explicit RawClient(uint16_t port, const char* address = "127.0.0.1", int receive_buffer = 0,
                     const char* from = nullptr) {
    bool v6 = std::string_view(address).find(':') != std::string_view::npos;
    fd_ = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    if (from != nullptr) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      ::inet_pton(AF_INET, from, &local.sin_addr);
      REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0);
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (receive_buffer > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    }
    int rc;
    if (v6) {
      sockaddr_in6 to{};
      to.sin6_family = AF_INET6;
      to.sin6_port = htons(port);
      ::inet_pton(AF_INET6, address, &to.sin6_addr);
      rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to);
    } else {
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(port);
      ::inet_pton(AF_INET, address, &to.sin_addr);
      rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to);
    }
    REQUIRE(rc == 0);
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send(std::string_view data) {
    while (!data.empty()) {
      ssize_t sent = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      REQUIRE(sent > 0);
      data.remove_prefix(static_cast<size_t>(sent));
    }
  }
  /// Sends what the server takes of `data`; false once it closed the connection.
  bool offer(std::string_view data) {
    while (!data.empty()) {
      ssize_t sent = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (sent <= 0) return false;
      data.remove_prefix(static_cast<size_t>(sent));
    }
    return true;
  }
  /// Exactly `size` bytes, or fewer if the deadline passed or the server closed.
  std::string read(size_t size, std::chrono::milliseconds timeout = 5s) {
    std::string data;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (data.size() < size) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !readable(left)) break;
      char buffer[65536];
      ssize_t got = ::recv(fd_, buffer, std::min(sizeof buffer, size - data.size()), 0);
      if (got <= 0) break;
      data.append(buffer, static_cast<size_t>(got));
    }
    return data;
  }
  /// True if nothing arrives within `timeout` (and the connection is still open).
  bool silent(std::chrono::milliseconds timeout = 100ms) {
    if (!readable(timeout)) return true;
    char byte;
    return ::recv(fd_, &byte, 1, MSG_PEEK) < 0;
  }
  /// True once the server has closed the connection (EOF or reset), within `timeout`.
  bool closed_by_server(std::chrono::milliseconds timeout = 5s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!readable(50ms)) continue;
      char buffer[4096];
      ssize_t got = ::recv(fd_, buffer, sizeof buffer, 0);
      if (got <= 0) return true;
    }
    return false;
  }
  std::string ask(std::string_view request_bytes, size_t reply_size) {
    send(request_bytes);
    return read(reply_size);
  }

 private:
  bool readable(std::chrono::milliseconds timeout) {
    pollfd poll_fd{fd_, POLLIN, 0};
    return ::poll(&poll_fd, 1, static_cast<int>(timeout.count())) > 0;
  }

  int fd_ = -1;
};

// Runs `io` on this thread until `condition` holds (true) or `timeout` passes (false).
template <typename Condition>
bool run_until(asio::io_context& io, Condition condition, std::chrono::milliseconds timeout = 5s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (io.stopped()) io.restart();  // it ran out of work (between two servers)
    io.run_for(2ms);
  }
  return true;
}

// Sends what this process writes to stderr (cohort's log) to a file while it lives.
class StderrCapture {
 public:
  explicit StderrCapture(std::string path) : path_(std::move(path)) {
    flush();
    saved_ = ::dup(2);
    int file = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(file >= 0);
    ::dup2(file, 2);
    ::close(file);
  }
  ~StderrCapture() { restore(); }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  /// What was written so far.
  std::string text() {
    flush();
    return read_file(path_);
  }
  void restore() {
    if (saved_ < 0) return;
    flush();
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }

 private:
  static void flush() {
    std::fflush(stderr);
    console::drain(std::chrono::seconds(5));
  }

  std::string path_;
  int saved_ = -1;
};

size_t count_lines(const std::string& text, std::string_view containing) {
  size_t count = 0;
  for (const auto& line : split(text, '\n')) count += line.find(containing) != std::string::npos;
  return count;
}

const std::string kSetK1 = hex("00 03 00 00 00 00 00 00 00 2f 6b 31 02 00 00 00 00 00 00 00 76 31");
const std::string kWaitK1 = hex("05 01 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 2f 6b 31");
const std::string kGetK1 = hex("02 03 00 00 00 00 00 00 00 2f 6b 31");
const std::string kAddCnt5 = hex("03 04 00 00 00 00 00 00 00 2f 63 6e 74 05 00 00 00 00 00 00 00");

}  // namespace

TEST_CASE("store server: the spec's example bytes get the spec's replies", "[component][store]") {
  ServerThread server;
  REQUIRE_FALSE(server.start());
  REQUIRE(server.port() != 0);
  RawClient client(server.port());
  client.send(kSetK1);
  CHECK(client.ask(kWaitK1, 1) == hex("00"));
  CHECK(client.ask(kGetK1, 10) == hex("02 00 00 00 00 00 00 00 76 31"));
  CHECK(client.ask(kAddCnt5, 8) == hex("05 00 00 00 00 00 00 00"));
  CHECK(client.silent());
  // SET + WAIT in one segment (observed from 1.13), and a 1-byte GETNUMKEYS.
  client.send(kSetK1 + kWaitK1);
  CHECK(client.read(1) == hex("00"));
  CHECK(client.ask(hex("06"), 8) == i64(2));
}

TEST_CASE("store server: requests split into single bytes", "[component][store]") {
  ServerThread server;
  REQUIRE_FALSE(server.start());
  RawClient client(server.port());
  std::string wire = kSetK1 + kWaitK1 + kGetK1 + kAddCnt5;
  for (char byte : wire) client.send(std::string_view(&byte, 1));
  CHECK(client.read(1 + 10 + 8) == hex("00") + bytes("v1") + i64(5));
}

TEST_CASE("store server: a VALIDATE-era client", "[component][store]") {
  ServerThread server;
  REQUIRE_FALSE(server.start());
  RawClient client(server.port());
  RawClient other(server.port());
  client.send(hex("00 ce f7 85 3c"));
  std::string nonce;
  append_u32(nonce, 31337);
  CHECK(client.ask(hex("0d") + nonce, 4) == nonce);  // PING echoes
  client.send(validated(StoreOp::Set, {"/a"}, {"1"}));
  client.send(validated(StoreOp::MultiSet, {"/b", "/c"}, {"2", "3"}));
  client.send(validated(StoreOp::Append, {"/a"}, {"+"}));
  CHECK(client.ask(validated(StoreOp::MultiGet, {"/a", "/c", "/x"}), 8 + 2 + 8 + 1 + 8) ==
        bytes("1+") + bytes("3") + bytes(""));
  CHECK(client.ask(validated(StoreOp::GetNumKeys), 8) == i64(3));

  // WAIT deferred until another (legacy) connection sets the key.
  client.send(validated(StoreOp::Wait, {"/late"}));
  CHECK(client.silent());
  other.send(request(StoreOp::Set, {"/late"}, {"x"}));
  CHECK(client.read(1) == hex("00"));
  // 2.x timeout path: WAIT, CANCEL_WAIT answers 1, a later SET sends nothing.
  client.send(validated(StoreOp::Wait, {"/never"}));
  CHECK(client.silent());
  CHECK(client.ask(validated(StoreOp::CancelWait), 1) == hex("01"));
  other.send(request(StoreOp::Set, {"/never"}, {"x"}));
  CHECK(client.silent());
  // Queues and BARRIER.
  client.send(validated(StoreOp::QueuePush, {"q"}, {"item"}));
  CHECK(client.ask(validated(StoreOp::QueuePop, {"q"}), 8 + 12) == i64(1) + bytes("item"));
  RawClient third(server.port());
  third.send(hex("00 ce f7 85 3c"));
  third.send(validated(StoreOp::Barrier, {"/bar"}, {}, 2));
  CHECK(third.silent());
  CHECK(client.ask(validated(StoreOp::Barrier, {"/bar"}, {}, 2), 1) == hex("00"));
  CHECK(third.read(1) == hex("00"));
}

TEST_CASE("store server: bad input closes only that connection", "[component][store]") {
  ServerThread server;
  REQUIRE_FALSE(server.start());
  RawClient good(server.port());
  good.send(kSetK1);
  REQUIRE(cohort::test::wait_until([&] { return server.connections() == 1; }));

  struct Case {
    const char* name;
    std::string wire;
  };
  std::string text_value = request(StoreOp::Set, {"/text"}, {"abc"});
  std::vector<Case> cases = {
      {"unknown opcode", hex("ff")},
      {"unknown opcode after a good request", hex("06 0c")},
      {"oversized key", hex("02 ff ff ff ff ff ff ff 7f")},
      {"oversized value", hex("00 01 00 00 00 00 00 00 00 6b 00 00 00 00 00 00 00 01")},
      {"too many keys", hex("05") + i64(1 << 20)},
      {"wrong validate magic", hex("00 ce f7 85 3c 00 00 00 00 00")},
      {"ADD on a non-number", text_value + request(StoreOp::Add, {"/text"}, {}, 1)},
  };
  for (const auto& each : cases) {
    INFO(each.name);
    RawClient bad(server.port());
    bad.send(each.wire);
    CHECK(bad.closed_by_server());
    CHECK(good.ask(kGetK1, 10) == bytes("v1"));
  }
  CHECK(cohort::test::wait_until([&] { return server.connections() == 1; }));
  CHECK(server.num_keys() == 2);  // /k1 and /text
}

TEST_CASE("store server: a waiter that disconnects is forgotten", "[component][store]") {
  ServerThread server;
  REQUIRE_FALSE(server.start());
  RawClient setter(server.port());
  {
    RawClient waiter(server.port());
    waiter.send(request(StoreOp::Wait, {"/k"}));
    CHECK(waiter.silent());
  }
  CHECK(cohort::test::wait_until([&] { return server.connections() == 1; }));
  setter.send(request(StoreOp::Set, {"/k"}, {"v"}));
  CHECK(setter.ask(hex("06"), 8) == i64(1));
}

TEST_CASE("store server: a 1.13 client's abandoned wait sends no stray reply",
          "[component][store]") {
  ServerThread server;
  REQUIRE_FALSE(server.start());
  RawClient client(server.port());
  RawClient setter(server.port());
  client.send(request(StoreOp::Wait, {"/never"}));
  CHECK(client.silent());  // the client times out here and moves on:
  CHECK(client.ask(request(StoreOp::Add, {"/n"}, {}, 1), 8) == i64(1));
  setter.send(request(StoreOp::Set, {"/never"}, {"v"}));
  CHECK(setter.ask(hex("06"), 8) == i64(2));
  CHECK(client.silent());
  CHECK(client.ask(request(StoreOp::Add, {"/n"}, {}, 1), 8) == i64(2));
}

// Pipelines GET/ADD/GET rounds for a 1 MiB value (more replies than the server buffers for one
// connection) and reads them only afterwards; checks order and that others are served meanwhile.
void check_pipelined_big_replies(int receive_buffer) {
  ServerThread server;
  REQUIRE_FALSE(server.start());
  RawClient client(server.port(), "127.0.0.1", receive_buffer);
  RawClient other(server.port());
  std::string big(1 << 20, 'b');
  client.send(request(StoreOp::Set, {"/big"}, {big}));
  REQUIRE(client.ask(request(StoreOp::Check, {"/big"}), 1) == hex("00"));
  const int kRounds = 20;
  std::string pipeline;
  for (int i = 0; i < kRounds; ++i) {
    pipeline += request(StoreOp::Get, {"/big"});
    pipeline += request(StoreOp::Add, {"/n"}, {}, 1);
    pipeline += request(StoreOp::Get, {"/big"});
  }
  client.send(pipeline);
  CHECK(other.ask(request(StoreOp::Check, {"/big"}), 1) == hex("00"));  // others are served
  for (int i = 1; i <= kRounds; ++i) {
    INFO("round " << i);
    REQUIRE(client.read(8 + big.size(), 20s) == bytes(big));
    REQUIRE(client.read(8) == i64(i));
    REQUIRE(client.read(8 + big.size(), 20s) == bytes(big));
  }
  CHECK(client.silent());
}

TEST_CASE("store server: replies stay in order when the client reads slowly",
          "[component][store]") {
  check_pipelined_big_replies(0);
}

// With a receive buffer larger than the server's unsent limit, the server can write all of a
// paused batch at once: reading must still resume (a deadlock once).
TEST_CASE("store server: pipelined replies to a client with a huge receive buffer",
          "[component][store]") {
  check_pipelined_big_replies(64 << 20);
}

TEST_CASE("store server: a thousand concurrent connections", "[component][store]") {
  ServerThread server;
  REQUIRE_FALSE(server.start());
  const int kClients = 1000;
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<RawClient>(server.port()));
    clients.back()->send(request(StoreOp::Wait, {"/go"}));
  }
  CHECK(cohort::test::wait_until([&] { return server.connections() == kClients; }));
  RawClient setter(server.port());
  setter.send(request(StoreOp::Set, {"/go"}, {"1"}));
  for (auto& client : clients) REQUIRE(client->read(1) == hex("00"));
  for (int i = 0; i < kClients; ++i) {
    REQUIRE(clients[i]->ask(request(StoreOp::Add, {"/n"}, {}, 1), 8) == i64(i + 1));
  }
  clients.clear();
  CHECK(cohort::test::wait_until([&] { return server.connections() == 1; }));
}

TEST_CASE("store server: stop() closes every connection and the port", "[component][store]") {
  ServerThread server;
  REQUIRE_FALSE(server.start());
  RawClient idle(server.port());
  RawClient waiting(server.port());
  waiting.send(request(StoreOp::Wait, {"/k"}));
  REQUIRE(cohort::test::wait_until([&] { return server.connections() == 2; }));
  uint16_t port = server.port();
  server.stop();
  CHECK(idle.closed_by_server());
  CHECK(waiting.closed_by_server());
  CHECK(server.connections() == 0);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  CHECK(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0);
  ::close(fd);
}

TEST_CASE("store server: a fresh server per round in one io_context", "[component][store]") {
  asio::io_context io;
  for (int round = 0; round < 50; ++round) {
    auto server = std::make_unique<StoreServer>(io, StoreServerOptions{});
    REQUIRE_FALSE(server->start());
    RawClient client(server->port());
    client.send(request(StoreOp::Set, {"/round"}, {std::to_string(round)}));
    client.send(request(StoreOp::Wait, {"/never"}));
    CHECK(run_until(io, [&] { return server->store().value("/round") == std::to_string(round); }));
    CHECK(server->connection_count() == 1);
    server.reset();  // destroyed with a connection and a wait pending
    CHECK(client.closed_by_server(1s));
    run_until(
        io, [] { return false; }, 5ms);  // the aborted handlers run and let go
  }
}

TEST_CASE("store server: a bad address or a taken port is an error", "[component][store]") {
  ServerThread first;
  REQUIRE_FALSE(first.start());
  asio::io_context io;
  StoreServer taken(io, StoreServerOptions{"127.0.0.1", first.port()});
  CHECK(taken.start());
  StoreServer bad(io, StoreServerOptions{"not-an-address", 0});
  CHECK(bad.start());
}

TEST_CASE("store server: IPv6 loopback", "[component][store]") {
  ServerThread server(StoreServerOptions{"::1", 0});
  if (server.start()) {
    WARN("no IPv6 loopback here: skipped");
    return;
  }
  RawClient client(server.port(), "::1");
  client.send(kSetK1);
  CHECK(client.ask(kGetK1, 10) == bytes("v1"));
}

TEST_CASE("store server: real PyTorch TCPStore client operations", "[component][store][torch]") {
  ServerThread server;
  REQUIRE_FALSE(server.start());
  cohort::test::TempDir temp;
  std::string script =
      std::string(cohort::test::kSourceDir) + "/tests/component/store_torch_client.py";
  auto result = cohort::test::run_to_end(
      {"/usr/bin/python3", script, "ops", "127.0.0.1", std::to_string(server.port())},
      {.output_dir = temp.path(), .name = "torch_ops"}, 120s);
  INFO(result.out << result.err);
  CHECK(result.status.success());
  CHECK_THAT(result.out, Catch::Contains("store_torch_client: ok"));
}

TEST_CASE("store server: init_process_group(gloo) of two real PyTorch ranks",
          "[component][store][torch]") {
  ServerThread server;
  REQUIRE_FALSE(server.start());
  cohort::test::TempDir temp;
  std::string script =
      std::string(cohort::test::kSourceDir) + "/tests/component/store_torch_client.py";
  std::vector<std::unique_ptr<cohort::test::ChildProcess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    cohort::test::ChildOptions options{.output_dir = temp.path(), .name = "gloo"};
    options.env = {{"RANK", std::to_string(rank)},
                   {"LOCAL_RANK", std::to_string(rank)},
                   {"WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", std::to_string(server.port())},
                   {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                   {"TORCHELASTIC_RESTART_COUNT", "3"},
                   {"GLOO_SOCKET_IFNAME", "lo"}};
    ranks.push_back(std::make_unique<cohort::test::ChildProcess>(
        std::vector<std::string>{"/usr/bin/python3", script, "gloo"}, options));
  }
  for (auto& rank : ranks) {
    auto status = rank->wait(120s);
    INFO(rank->output());
    REQUIRE(status.has_value());
    CHECK(status->success());
    CHECK_THAT(rank->out(), Catch::Contains("store_torch_client: ok"));
  }
  // 1.13 agent mode: every key under /worker/attempt_<restart count>/, plus init/.
  CHECK(server.num_keys() > 3);
}

TEST_CASE("store server: real LibTorch c10d::TCPStore client", "[component][store][torch]") {
#ifdef COHORT_TEST_LIBTORCH_STORE_CLIENT
  ServerThread server;
  REQUIRE_FALSE(server.start());
  cohort::test::TempDir temp;
  auto result = cohort::test::run_to_end(
      {COHORT_TEST_LIBTORCH_STORE_CLIENT, "127.0.0.1", std::to_string(server.port())},
      {.output_dir = temp.path(), .name = "libtorch_client"}, 120s);
  INFO(result.out << result.err);
  CHECK(result.status.success());
  CHECK_THAT(result.out, Catch::Contains("libtorch_store_client: ok"));
#else
  FAIL(
      "prerequisite missing: LibTorch (libtorch-dev, installed by scripts/setup) was not found "
      "at configure time, so libtorch_store_client was not built");
#endif
}

TEST_CASE("store server: memory per idle connection", "[.][measure][store]") {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  WARN("skipped: mallinfo2() does not see a sanitizer's allocator");
  return;
#endif
  ServerThread server;
  REQUIRE_FALSE(server.start());
  const int kClients = 5000;
  std::vector<std::unique_ptr<RawClient>> clients;
  auto heap = [] { return mallinfo2().uordblks; };
  // Warm up the server's one-time allocations (read buffer, registry, reply vectors).
  for (int i = 0; i < 100; ++i) {
    clients.push_back(std::make_unique<RawClient>(server.port()));
    clients.back()->ask(request(StoreOp::Add, {"/n"}, {}, 1), 8);
  }
  size_t before = server.on_io(heap);
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<RawClient>(server.port()));
    REQUIRE(clients.back()->ask(request(StoreOp::Add, {"/n"}, {}, 1), 8).size() == 8);
  }
  REQUIRE(cohort::test::wait_until([&] { return server.connections() == kClients + 100; }));
  size_t after = server.on_io(heap);
  double per_connection = double(after - before) / kClients;
  WARN("heap per idle connection: " << per_connection << " bytes (" << kClients
                                    << " connections; client sockets hold no heap)");
  CHECK(per_connection < 4096);
}

// Replays what a PyTorch 2.x (VALIDATE-era) c10d::TCPStore client writes, op by op, and checks
// what a PyTorch 2.x server answers. Requests follow torch/csrc/distributed/c10d/TCPStore.cpp:
// SendBuffer puts the QueryType byte (TCPStoreBackend.hpp), then appendValue<T> copies T's
// native (little-endian) bytes, appendString/appendBytes a uint64_t length and the raw bytes;
// every user key gets keyPrefix_ "/" (the init/ counter does not). Replies follow
// TCPStoreLibUvBackend.cpp (the default server since 2.4) and TCPStoreBackend.cpp. Every byte
// is written out here, without the codec's encoders, so the test checks the codec too.
TEST_CASE("store server: the byte sequences of a PyTorch 2.x client", "[component][store]") {
  auto le = [](uint64_t value, size_t width) {
    std::string out;
    for (size_t i = 0; i < width; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
    return out;
  };
  auto u32 = [&](uint32_t value) { return le(value, 4); };
  auto u64 = [&](uint64_t value) { return le(value, 8); };
  auto s64 = [&](int64_t value) { return le(static_cast<uint64_t>(value), 8); };
  auto str = [&](std::string_view text) { return u64(text.size()) + std::string(text); };
  // QueryType : uint8_t, in enum order: VALIDATE .. CANCEL_WAIT, PING, QUEUE_*, LIST_KEYS (named
  // LIST in some 2.x sources, same value), BARRIER.
  const std::string kValidate = hex("00"), kSet = hex("01"), kCompareSet = hex("02"),
                    kGet = hex("03"), kAdd = hex("04"), kCheck = hex("05"), kWait = hex("06"),
                    kGetNumKeys = hex("07"), kDeleteKey = hex("08"), kAppend = hex("09"),
                    kMultiGet = hex("0a"), kMultiSet = hex("0b"), kCancelWait = hex("0c"),
                    kPing = hex("0d"), kQueuePush = hex("0e"), kQueuePop = hex("0f"),
                    kQueueLen = hex("10"), kListKeys = hex("11"), kBarrier = hex("12");
  // CheckResponseType {READY, NOT_READY}, WaitResponseType {STOP_WAITING, WAIT_CANCELED}.
  const std::string kReady = hex("00"), kNotReady = hex("01");
  const std::string kStopWaiting = hex("00"), kWaitCanceled = hex("01");
  // doWait(): WAIT, u64 count (appendValue(keys.size())), then each key as a string.
  auto wait_on = [&](std::vector<std::string_view> keys) {
    std::string out = kWait + u64(keys.size());
    for (auto key : keys) out += str(key);
    return out;
  };

  ServerThread server;
  REQUIRE_FALSE(server.start());
  RawClient client(server.port());
  RawClient peer(server.port());

  // TCPStore(): connect, validate() = VALIDATE + u32 validationMagicNumber 0x3C85F7CE (no reply),
  // ping() = PING + u32 nonce (getpid()), which the server echoes as a u32.
  CHECK(kValidate + u32(0x3C85F7CE) == hex("00 ce f7 85 3c"));
  client.send(kValidate + u32(0x3C85F7CE));
  CHECK(client.silent());
  CHECK(client.ask(kPing + u32(0x00012345), 4) == hex("45 23 01 00"));
  peer.send(kValidate + u32(0x3C85F7CE));
  CHECK(peer.ask(kPing + u32(0xFEDCBA98), 4) == hex("98 ba dc fe"));
  // waitForWorkers(): incrementValueBy(initKey_ "init/", 1) = ADD + string + i64 -> i64.
  const std::string add_init = kAdd + str("init/") + s64(1);
  CHECK(add_init == hex("04 05 00 00 00 00 00 00 00 69 6e 69 74 2f 01 00 00 00 00 00 00 00"));
  CHECK(client.ask(add_init, 8) == hex("01 00 00 00 00 00 00 00"));

  // set(): SET + key + value, no reply.
  client.send(kSet + str("/k1") + str("v1"));
  CHECK(client.silent());
  // get() = doGet(): WAIT [key] (STOP_WAITING) then GET + key -> u64 length + bytes.
  CHECK(client.ask(wait_on({"/k1"}), 1) == kStopWaiting);
  CHECK(client.ask(kGet + str("/k1"), 10) == hex("02 00 00 00 00 00 00 00 76 31"));

  // compareSet(): COMPARE_SET + key + expected + desired -> the value as bytes.
  CHECK(client.ask(kCompareSet + str("/cas") + str("") + str("a"), 9) == str("a"));    // created
  CHECK(client.ask(kCompareSet + str("/cas") + str("a") + str("b"), 9) == str("b"));   // swapped
  CHECK(client.ask(kCompareSet + str("/cas") + str("x") + str("c"), 9) == str("b"));   // current
  CHECK(client.ask(kCompareSet + str("/none") + str("x") + str("y"), 9) == str("x"));  // expected

  // add(): ADD + key + i64 delta (two's complement) -> i64 new value.
  CHECK(client.ask(kAdd + str("/cnt") + s64(5), 8) == hex("05 00 00 00 00 00 00 00"));
  CHECK(client.ask(kAdd + str("/cnt") + hex("f9 ff ff ff ff ff ff ff"), 8) ==
        hex("fe ff ff ff ff ff ff ff"));  // 5 + (-7) = -2
  CHECK(client.ask(wait_on({"/cnt"}), 1) == kStopWaiting);
  CHECK(client.ask(kGet + str("/cnt"), 10) == str("-2"));  // stored as decimal text

  // check(): CHECK + u64 count + keys -> READY 0 / NOT_READY 1, never blocks.
  CHECK(client.ask(kCheck + u64(2) + str("/k1") + str("/cnt"), 1) == kReady);
  CHECK(client.ask(kCheck + u64(2) + str("/k1") + str("/nope"), 1) == kNotReady);
  CHECK(client.ask(kCheck + u64(0), 1) == kReady);

  // deleteKey(): DELETE_KEY + key -> i64 number deleted (the client tests == 1).
  client.send(kSet + str("/del") + str("x"));
  CHECK(client.ask(kDeleteKey + str("/del"), 8) == s64(1));
  CHECK(client.ask(kDeleteKey + str("/del"), 8) == s64(0));

  // append(): APPEND + key + bytes, no reply; creates, then concatenates.
  client.send(kAppend + str("/app") + str("ab"));
  client.send(kAppend + str("/app") + str("cd"));
  // multiSet(): MULTI_SET + i64 count + count x (key, value), no reply.
  client.send(kMultiSet + s64(2) + str("/m1") + str("1") + str("/m2") + str("22"));
  CHECK(client.silent());
  // multiGet(): WAIT [keys] then MULTI_GET + u64 count + keys -> count x bytes, in order.
  CHECK(client.ask(wait_on({"/m2", "/app", "/m1"}), 1) == kStopWaiting);
  CHECK(client.ask(kMultiGet + u64(3) + str("/m2") + str("/app") + str("/m1"), 3 * 8 + 7) ==
        str("22") + str("abcd") + str("1"));
  // multiGet({}): WAIT with no key answers at once; MULTI_GET of none answers nothing.
  CHECK(client.ask(wait_on({}), 1) == kStopWaiting);
  client.send(kMultiGet + u64(0));
  CHECK(client.silent());

  // wait(): STOP_WAITING is deferred until every key exists (here set by another client).
  client.send(wait_on({"/late", "/k1"}));
  CHECK(client.silent());
  peer.send(kSet + str("/late") + str("v"));
  CHECK(client.read(1) == kStopWaiting);
  // Timeout in doWait(): the client sends CANCEL_WAIT (opcode alone) and expects WAIT_CANCELED;
  // nothing may follow when the key appears later.
  client.send(wait_on({"/never"}));
  CHECK(client.silent());
  CHECK(client.ask(kCancelWait, 1) == kWaitCanceled);
  // The race doWait() tolerates: STOP_WAITING was on its way when CANCEL_WAIT went out, so the
  // client reads STOP_WAITING, then WAIT_CANCELED.
  client.send(wait_on({"/race"}));
  CHECK(client.silent());
  peer.send(kSet + str("/race") + str("v"));
  CHECK(peer.ask(kCheck + u64(1) + str("/race"), 1) == kReady);  // the SET is applied
  CHECK(client.ask(kCancelWait, 2) == kStopWaiting + kWaitCanceled);
  // CANCEL_WAIT with no wait pending still answers WAIT_CANCELED.
  CHECK(client.ask(kCancelWait, 1) == kWaitCanceled);
  CHECK(client.silent());

  // queuePush(): QUEUE_PUSH + key + bytes, no reply. queueLen(): QUEUE_LEN + key -> i64.
  // queuePop(key, block=false): QUEUE_POP + key -> i64 length before the pop, then (only if it
  // was > 0) the front element as bytes; 0 makes the client raise DistQueueEmptyError.
  client.send(kQueuePush + str("/q") + str("one"));
  client.send(kQueuePush + str("/q") + str("two"));
  CHECK(client.ask(kQueueLen + str("/q"), 8) == s64(2));
  CHECK(client.ask(kCheck + u64(1) + str("/q"), 1) == kReady);  // a non-empty queue exists
  CHECK(client.ask(kQueuePop + str("/q"), 8 + 11) == s64(2) + str("one"));
  CHECK(client.ask(kQueuePop + str("/q"), 8 + 11) == s64(1) + str("two"));
  CHECK(client.ask(kQueuePop + str("/q"), 8) == s64(0));
  CHECK(client.silent());
  CHECK(client.ask(kQueueLen + str("/q"), 8) == s64(0));
  // queuePop(key, block=true): the blocking flag is not sent; the client sends WAIT [key] first,
  // released by the next push.
  client.send(wait_on({"/q"}));
  CHECK(client.silent());
  peer.send(kQueuePush + str("/q") + str("job"));
  CHECK(client.read(1) == kStopWaiting);
  CHECK(client.ask(kQueuePop + str("/q"), 8 + 11) == s64(1) + str("job"));

  // barrier(): BARRIER + key + i64 world size -> STOP_WAITING once world size arrivals counted
  // the key up (decimal text, like ADD); the earlier arrivals are answered then.
  client.send(kBarrier + str("/bar") + s64(2));
  CHECK(client.silent());
  CHECK(peer.ask(kBarrier + str("/bar") + s64(2), 1) == kStopWaiting);
  CHECK(client.read(1) == kStopWaiting);
  CHECK(client.ask(wait_on({"/bar"}), 1) == kStopWaiting);
  CHECK(client.ask(kGet + str("/bar"), 9) == str("2"));
  // A barrier timeout cancels exactly like a wait timeout.
  client.send(kBarrier + str("/bar3") + s64(3));
  CHECK(client.silent());
  CHECK(client.ask(kCancelWait, 1) == kWaitCanceled);

  // _splitSet(): the SET opcode and key are flushed, then the value a second later.
  client.send(kSet + str("/split"));
  CHECK(client.silent());
  client.send(str("sv"));
  CHECK(client.ask(wait_on({"/split"}), 1) == kStopWaiting);
  CHECK(client.ask(kGet + str("/split"), 10) == str("sv"));

  // getNumKeys(): GETNUMKEYS alone -> i64 number of keys (queues not counted).
  const std::vector<std::string> keys = {"/app",  "/bar", "/bar3", "/cas",  "/cnt",   "/k1",
                                         "/late", "/m1",  "/m2",   "/race", "/split", "init/"};
  CHECK(client.ask(kGetNumKeys, 8) == s64(static_cast<int64_t>(keys.size())));
  // listKeys(): LIST_KEYS alone -> i64 count, then each key as a string, in no set order (the
  // client keeps those that start with "/" and strips it).
  size_t reply_size = 8;
  for (const auto& key : keys) reply_size += 8 + key.size();
  std::string reply = client.ask(kListKeys, reply_size);
  REQUIRE(reply.size() == reply_size);
  CHECK(reply.substr(0, 8) == s64(static_cast<int64_t>(keys.size())));
  std::vector<std::string> listed;
  for (size_t pos = 8; pos + 8 <= reply.size();) {
    uint64_t length = 0;
    for (size_t i = 0; i < 8; ++i) length |= uint64_t(uint8_t(reply[pos + i])) << (8 * i);
    listed.push_back(reply.substr(pos + 8, length));
    pos += 8 + length;
  }
  std::sort(listed.begin(), listed.end());
  CHECK(listed == keys);
  CHECK(client.silent());
  CHECK(peer.silent());
}

TEST_CASE("store server: a write past the quota closes that connection with a logged reason",
          "[component][store]") {
  StoreServerOptions options;
  options.limits.quota_bytes = 64 * 1024;
  options.limits.max_value_bytes = 16 * 1024;
  ServerThread server(options);
  REQUIRE_FALSE(server.start());
  TempDir dir;
  StderrCapture log(dir.file("stderr"));
  RawClient other(server.port());
  other.send(request(StoreOp::Set, {"/mine"}, {"kept"}));
  // A 1.13 SET has no reply: ask on the same connection, so that it is in before the filler
  // (whose connection may be served on another thread).
  REQUIRE(other.ask(request(StoreOp::GetNumKeys), 8) == i64(1));
  RawClient filler(server.port());
  std::string value(10 * 1024, 'v');
  for (int i = 0; i < 6; ++i)
    filler.send(request(StoreOp::Set, {"/f" + std::to_string(i)}, {value}));
  CHECK(filler.ask(request(StoreOp::GetNumKeys), 8) == i64(7));  // 61 KiB of 64 stored
  filler.send(request(StoreOp::Set, {"/f6"}, {value}));
  CHECK(filler.closed_by_server());
  RawClient appender(server.port());  // APPEND past the value limit
  appender.send(validated(StoreOp::Validate, {}, {}, kStoreValidateMagic) +
                validated(StoreOp::Append, {"/f0"}, {std::string(7 * 1024, 'a')}));
  CHECK(appender.closed_by_server());
  CHECK(other.ask(request(StoreOp::Get, {"/mine"}), 12) == bytes("kept"));
  CHECK(other.ask(request(StoreOp::Get, {"/f5"}), 8 + value.size()) == bytes(value));
  CHECK(server.num_keys() == 7);
  std::string text = log.text();
  log.restore();
  INFO(text);
  CHECK(count_lines(text, "closing the connection from 127.0.0.1") == 2);
  CHECK(count_lines(text, "past its quota of 65536") == 1);
  CHECK(count_lines(text, "past the limit of 16384") == 1);
}

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// Heap bytes in use in this process (the server runs in it), mmapped blocks included.
size_t heap_in_use() {
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

// The start of a 1.13 SET whose value declares `value_bytes`, with `sent` of them.
std::string half_sent_set(const std::string& key, uint64_t value_bytes, size_t sent) {
  return u8(0) + bytes(key) + u64(value_bytes) + std::string(sent, 'v');
}

}  // namespace

TEST_CASE("store server: half-sent SETs are charged against the quota before their bytes are read",
          "[component][store]") {
  StoreServerOptions options;
  options.limits.quota_bytes = 16 * kMiB;
  ServerThread server(options);
  REQUIRE_FALSE(server.start());
  TempDir dir;
  StderrCapture log(dir.file("stderr"));
  std::vector<std::unique_ptr<RawClient>> senders;
  for (int i = 0; i < 8; ++i) {  // each declares 8 MiB and sends 1 MiB: room for two
    senders.push_back(std::make_unique<RawClient>(server.port()));
    senders.back()->offer(half_sent_set("/big" + std::to_string(i), 8 * kMiB, kMiB));
  }
  // "/bigN" and its value, and their strings
  const uint64_t charged =
      5 + 8 * kMiB + 2 * kStoreFieldOverheadBytes - kStoreUnchargedRequestBytes;
  CHECK(wait_until([&] { return server.connections() == 2; }, 10s));
  // Each connection charges on its own thread (with an io pool) once it has read its request's
  // head: wait for both.
  CHECK(wait_until([&] { return server.held_bytes() == 2 * charged; }, 10s));
  RawClient other(server.port());  // small requests still fit in the quota's room
  other.send(request(StoreOp::Set, {"/mine"}, {"kept"}));
  CHECK(other.ask(request(StoreOp::Get, {"/mine"}), 12) == bytes("kept"));
  RawClient large(server.port());  // a whole SET that no longer fits is refused
  large.offer(request(StoreOp::Set, {"/large"}, {std::string(kMiB, 'l')}));
  CHECK(large.closed_by_server());
  senders.clear();  // the half-sent requests end with their connections: the charge goes back
  CHECK(wait_until([&] { return server.held_bytes() == 0; }, 5s));
  other.send(request(StoreOp::Set, {"/large"}, {std::string(8 * kMiB, 'l')}));
  CHECK(other.ask(request(StoreOp::GetNumKeys), 8) == i64(2));
  std::string text = log.text();
  log.restore();
  INFO(text);
  CHECK(count_lines(text, "SET: the bytes it declares would take the store to") == 7);
}

TEST_CASE("store server: half-sent MULTI_SETs past the quota are closed, not buffered",
          "[component][store]") {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  WARN("skipped: mallinfo2() does not see a sanitizer's allocator");
  return;
#endif
  StoreServerOptions options;
  options.limits.quota_bytes = 16 * kMiB;
  ServerThread server(options);
  REQUIRE_FALSE(server.start());
  RawClient other(server.port());
  other.send(request(StoreOp::Set, {"/mine"}, {"kept"}));
  CHECK(other.ask(request(StoreOp::GetNumKeys), 8) == i64(1));
  size_t before = server.on_io(heap_in_use);
  // Four clients each declare a MULTI_SET of 62 pairs of 4 MiB values (249 MiB, under the
  // request limit) and send ten whole pairs, 40 MiB, then stop halfway.
  std::vector<std::unique_ptr<RawClient>> clients;
  const std::string value(4 * kMiB, 'v');
  for (int c = 0; c < 4; ++c) {
    clients.push_back(std::make_unique<RawClient>(server.port()));
    RawClient& client = *clients.back();
    client.offer(u8(10) + u64(62));  // MULTI_SET in the 1.13 numbering, then its count
    for (int pair = 0; pair < 10; ++pair) {
      if (!client.offer(bytes(cohort::cat("/k", c, "_", pair)) + bytes(value))) break;
    }
  }
  for (auto& client : clients) CHECK(client->closed_by_server());
  CHECK(wait_until([&] { return server.connections() == 1; }, 10s));
  size_t after = server.on_io(heap_in_use);
  INFO("heap growth " << (after - before) / kMiB << " MiB");
  CHECK(after < before + 8 * kMiB);  // 160 MiB sent and left unfinished
  CHECK(server.held_bytes() == 0);
  CHECK(other.ask(request(StoreOp::Get, {"/mine"}), 12) == bytes("kept"));
}

TEST_CASE("store server: half-sent MULTI_SETs of empty pairs are charged for their strings",
          "[component][store]") {
  StoreServerOptions options;
  options.limits.quota_bytes = kMiB;
  ServerThread server(options);
  REQUIRE_FALSE(server.start());
  RawClient other(server.port());
  other.send(request(StoreOp::Set, {"/mine"}, {"kept"}));
  CHECK(other.ask(request(StoreOp::GetNumKeys), 8) == i64(1));
  // Four clients each declare a MULTI_SET of 131072 pairs, send all but the last, empty ones
  // (2 MiB, declaring no bytes but 16 MiB of strings), and stop.
  std::string empty_pairs;
  for (uint64_t pair = 1; pair < kStoreMaxKeysPerRequest; ++pair) empty_pairs += u64(0) + u64(0);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int c = 0; c < 4; ++c) {
    clients.push_back(std::make_unique<RawClient>(server.port()));
    clients.back()->offer(u8(10) + u64(kStoreMaxKeysPerRequest) + empty_pairs);
  }
  for (auto& client : clients) CHECK(client->closed_by_server());
  CHECK(wait_until([&] { return server.connections() == 1; }, 10s));
  CHECK(server.held_bytes() == 0);
  CHECK(other.ask(request(StoreOp::Get, {"/mine"}), 12) == bytes("kept"));
}

TEST_CASE("store server: replies left unread count against the quota until sent or closed",
          "[component][store]") {
  StoreServerOptions options;
  options.limits.quota_bytes = 28 * kMiB;
  ServerThread server(options);
  REQUIRE_FALSE(server.start());
  TempDir dir;
  StderrCapture log(dir.file("stderr"));
  const std::string value(8 * kMiB, 'v');
  RawClient reader(server.port());
  reader.send(request(StoreOp::Set, {"/v"}, {value}) + request(StoreOp::Set, {"/s"}, {"small"}));
  REQUIRE(reader.ask(request(StoreOp::GetNumKeys), 8) == i64(2));
  // Two clients ask for the 8 MiB value four times each and read nothing: each session stops
  // after one reply (past kStoreMaxUnsentBytes), which counts against the quota.
  const std::string get_value = request(StoreOp::Get, {"/v"});
  const uint64_t held_each = 8 + value.size() - (kStoreMaxUnsentBytes + kStoreUnchargedReplyBytes);
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 1; i <= 2; ++i) {
    idle.push_back(std::make_unique<RawClient>(server.port()));
    idle.back()->send(get_value + get_value + get_value + get_value);
    CHECK(wait_until([&] { return server.held_bytes() == i * held_each; }, 10s));
  }
  // 8 MiB stored and 16 held: a third 8 MiB reply would take the store past 28 MiB.
  RawClient third(server.port());
  third.send(get_value);
  CHECK(third.closed_by_server());
  CHECK(reader.ask(request(StoreOp::Get, {"/s"}), 8 + 5) == bytes("small"));  // small ones go
  idle.clear();
  CHECK(wait_until([&] { return server.held_bytes() == 0; }, 10s));
  CHECK(reader.ask(get_value, 8 + value.size()) == bytes(value));
  CHECK(server.held_bytes() == 0);  // sent: returned
  std::string text = log.text();
  log.restore();
  INFO(text);
  CHECK(count_lines(text, "GET reply of 8388616 bytes would take the store to") == 1);
}

TEST_CASE("store server: large replies asked for at once from many connections keep to the quota",
          "[component][store]") {
  // With COHORT_TEST_STORE_THREADS > 1 the requests are applied on several threads at once: a
  // reply checked on one must be charged before the next is checked on another.
  const std::string value(8 * kMiB, 'v');
  const uint64_t reply = 8 + value.size();
  const uint64_t held_each = reply - (kStoreMaxUnsentBytes + kStoreUnchargedReplyBytes);
  StoreServerOptions options;
  // Room for two such replies left unread, not three.
  options.limits.quota_bytes = 2 + value.size() + kStoreEntryOverheadBytes + reply + held_each;
  ServerThread server(options);
  REQUIRE_FALSE(server.start());
  TempDir dir;
  StderrCapture log(dir.file("stderr"));
  RawClient writer(server.port());
  writer.send(request(StoreOp::Set, {"/v"}, {value}));
  REQUIRE(writer.ask(request(StoreOp::GetNumKeys), 8) == i64(1));
  const uint64_t room = options.limits.quota_bytes - server.used_bytes();
  constexpr int kAskers = 12;
  std::vector<std::unique_ptr<RawClient>> askers;
  for (int i = 0; i < kAskers; ++i) {
    askers.push_back(std::make_unique<RawClient>(server.port(), "127.0.0.1", 4096));
  }
  REQUIRE(wait_until([&] { return server.connections() == 1 + kAskers; }, 10s));
  const std::string get_value = request(StoreOp::Get, {"/v"});
  std::latch go(kAskers);
  std::atomic<int> sent{0};
  std::vector<std::thread> senders;
  for (auto& asker : askers) {
    senders.emplace_back([&, client = asker.get()] {  // no Catch assertion off the main thread
      go.arrive_and_wait();
      if (client->offer(get_value)) ++sent;
    });
  }
  for (auto& sender : senders) sender.join();
  REQUIRE(sent == kAskers);
  // Two connections hold their reply, the others were refused.
  bool settled = wait_until([&] { return server.connections() == 3; }, 10s);
  uint64_t held = server.held_bytes();
  std::string text = log.text();
  log.restore();
  INFO(text);
  CHECK(settled);
  CHECK(held <= room);
  CHECK(held == 2 * held_each);
  CHECK(count_lines(text, "GET reply of 8388616 bytes would take the store to") == kAskers - 2);
}

TEST_CASE("store server: clients that ask for small values and never read stall only themselves",
          "[component][store]") {
  StoreServerOptions options;
  options.limits.quota_bytes = 4 * kMiB;
  options.budget = std::make_shared<ByteBudget>(4 * kMiB);
  ServerThread server(options);
  REQUIRE_FALSE(server.start());
  const std::string value(60 * 1024, 'v');  // its GET reply is too small to be checked
  RawClient other(server.port());
  other.send(request(StoreOp::Set, {"/v"}, {value}));
  REQUIRE(other.ask(request(StoreOp::GetNumKeys), 8) == i64(1));
  [[maybe_unused]] size_t heap_before = server.on_io(heap_in_use);
  // Eight clients each ask for the value 300 times (18 MiB of replies) and read none: each
  // session stops applying their requests once a little is unsent, and charges nothing.
  std::string gets;
  for (int i = 0; i < 300; ++i) gets += request(StoreOp::Get, {"/v"});
  std::vector<std::unique_ptr<RawClient>> hoarders;
  for (int i = 0; i < 8; ++i) {
    hoarders.push_back(std::make_unique<RawClient>(server.port(), "127.0.0.1", 4096));
    hoarders.back()->send(gets);
  }
  CHECK_FALSE(wait_until([&] { return server.held_bytes() > 0; }, 1s));
  [[maybe_unused]] size_t heap_after = server.on_io(heap_in_use);
  // The other clients' writes still fit in the quota and the budget.
  other.send(request(StoreOp::Set, {"/w"}, {std::string(2 * kMiB, 'w')}));
  CHECK(other.ask(request(StoreOp::GetNumKeys), 8) == i64(2));
  // (mallinfo2() does not see a sanitizer's allocator.)
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  INFO("heap growth " << (heap_after - heap_before) / 1024 << " KiB");
  CHECK(heap_after < heap_before + 4 * kMiB);
#endif
  // Each hoarder gets all its replies, in order, once it reads.
  for (auto& hoarder : hoarders) {
    for (int i = 0; i < 300; ++i) REQUIRE(hoarder->read(8 + value.size()) == bytes(value));
  }
  CHECK(server.held_bytes() == 0);
}

TEST_CASE("store server: stores on their own threads share one budget and give it back at the end",
          "[component][store]") {
  auto budget = std::make_shared<ByteBudget>(24 * kMiB);
  StoreServerOptions options;
  options.limits.quota_bytes = 16 * kMiB;
  options.budget = budget;
  // Two runs' stores, each on its own thread.
  auto first = std::make_unique<ServerThread>(options);
  ServerThread second(options);
  REQUIRE_FALSE(first->start());
  REQUIRE_FALSE(second.start());
  TempDir dir;
  StderrCapture log(dir.file("stderr"));
  const std::string value(6 * kMiB, 'v');
  RawClient a(first->port()), b(second.port());
  a.send(request(StoreOp::Set, {"/a1"}, {value}) + request(StoreOp::Set, {"/a2"}, {value}));
  REQUIRE(a.ask(request(StoreOp::GetNumKeys), 8) == i64(2));
  b.send(request(StoreOp::Set, {"/b1"}, {value}));
  REQUIRE(b.ask(request(StoreOp::GetNumKeys), 8) == i64(1));
  // 18 MiB together; the second store holds 6 of its 16 MiB quota, but a fourth value would
  // take the two past their 24 MiB budget.
  b.send(request(StoreOp::Set, {"/b2"}, {value}));
  CHECK(b.closed_by_server());
  CHECK(budget->used() < 19 * kMiB);
  first.reset();  // the first run ended: its 12 MiB go back
  CHECK(wait_until([&] { return budget->used() < 7 * kMiB; }, 5s));
  RawClient again(second.port());
  again.send(request(StoreOp::Set, {"/b2"}, {value}));  // refused above, it fits now
  CHECK(again.ask(request(StoreOp::GetNumKeys), 8) == i64(2));
  std::string text = log.text();
  log.restore();
  INFO(text);
  CHECK(count_lines(text, "past their budget of 25165824 bytes (--store-budget)") == 1);
}

TEST_CASE("store server: only allowed peers are served", "[component][store]") {
  StoreServerOptions options;
  options.allowed_peers = std::vector{asio::ip::make_address("127.0.0.1")};
  ServerThread server(options);
  REQUIRE_FALSE(server.start());
  TempDir dir;
  StderrCapture log(dir.file("stderr"));
  RawClient member(server.port());
  member.send(kSetK1);
  for (int i = 0; i < 3; ++i) {
    RawClient stranger(server.port(), "127.0.0.1", 0, "127.0.0.9");
    stranger.send(kGetK1);
    CHECK(stranger.closed_by_server());
  }
  CHECK(member.ask(kGetK1, 10) == bytes("v1"));
  CHECK(server.connections() == 1);
  std::string text = log.text();
  log.restore();
  INFO(text);
  // One line for the first refusal; the others within the second are counted, not logged.
  CHECK(count_lines(text, "refused a connection from 127.0.0.9") == 1);

  server.allow(std::vector{asio::ip::make_address("127.0.0.9")});  // the next round's members
  RawClient now_member(server.port(), "127.0.0.1", 0, "127.0.0.9");
  CHECK(now_member.ask(kGetK1, 10) == bytes("v1"));
  RawClient former(server.port());
  CHECK(former.closed_by_server());
  server.allow(std::nullopt);  // everyone (the standalone store)
  RawClient anyone(server.port(), "127.0.0.1", 0, "127.0.0.7");
  CHECK(anyone.ask(kGetK1, 10) == bytes("v1"));
}

TEST_CASE("store server: out of descriptors, a connection is refused at once and said so once",
          "[component][store]") {
  ServerThread server;
  REQUIRE_FALSE(server.start());
  TempDir dir;
  StderrCapture log(dir.file("stderr"));
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  int pending = ::socket(AF_INET, SOCK_STREAM, 0);  // made before the table is full
  REQUIRE(pending >= 0);
  int null = ::open("/dev/null", O_RDONLY);
  REQUIRE(null >= 0);
  // Fill the descriptor table: a low soft limit, then copies of /dev/null up to it (bounded).
  rlimit low = saved;
  low.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 256);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> filler;
  for (int fd; filler.size() < 256 && (fd = ::dup(null)) >= 0;) filler.push_back(fd);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(server.port());
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  REQUIRE(::connect(pending, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);  // the backlog

  auto cpu_before = server.cpu_time();
  std::this_thread::sleep_for(1500ms);  // the server keeps failing to accept meanwhile
  auto cpu_used = server.cpu_time() - cpu_before;
  for (int fd : filler) ::close(fd);
  ::close(null);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  std::string text = log.text();
  CHECK(cpu_used.count() < 150);  // a spinning acceptor takes most of the 1.5 s
  // The pending connection was accepted with the reserve descriptor and closed: its client is
  // told at once instead of hanging in the listen queue.
  pollfd poll_fd{pending, POLLIN, 0};
  REQUIRE(::poll(&poll_fd, 1, 5000) == 1);
  char byte = 0;
  CHECK(::recv(pending, &byte, 1, 0) <= 0);
  ::close(pending);
  INFO(text);
  CHECK(count_lines(text, "store: out of file descriptors: refusing new connections") == 1);
  CHECK(count_lines(text, "raise it with `ulimit -n`") == 1);
  CHECK(count_lines(text, "LimitNOFILE=") == 1);
  CHECK(count_lines(text, "store: accept failed") == 0);

  // Descriptors are free again: a new connection is served, and the end of the shortage said.
  RawClient after(server.port());
  CHECK(after.ask(request(StoreOp::GetNumKeys), 8) == i64(0));
  CHECK(cohort::test::wait_until(
      [&] {
        return count_lines(log.text(), "store: accepting connections again; 1 connection was") == 1;
      },
      5s));
  log.restore();
}

namespace {

// A client for load from a thread of its own (Catch's assertions are for the test's thread):
// `ops` ADD round trips on `key`; the number that got an 8-byte answer.
int add_in_a_loop(uint16_t port, const std::string& key, int ops) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  int answered = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
    std::string add;
    append_request(add, StoreRequest{StoreOp::Add, {key}, {}, 1}, StoreNumbering::Legacy113);
    for (; answered < ops; ++answered) {
      if (::send(fd, add.data(), add.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(add.size())) {
        break;
      }
      char reply[8];
      if (::recv(fd, reply, sizeof reply, MSG_WAITALL) != 8) break;
    }
  }
  ::close(fd);
  return answered;
}

// Servers sharing an IoPool with the test's io_context, whose thread runs here.
struct PooledServers {
  explicit PooledServers(int threads, int servers) : pool(io, threads) {
    for (int i = 0; i < servers; ++i) {
      StoreServerOptions options;
      options.io_pool = &pool;
      stores.push_back(std::make_unique<StoreServer>(io, options));
      REQUIRE_FALSE(stores.back()->start());
    }
    thread = std::thread([this] { io.run(); });
  }
  ~PooledServers() {
    asio::post(io, [this] {
      for (auto& store : stores) store->stop();
      io.stop();
    });
    thread.join();
    stores.clear();
  }
  int64_t counter(size_t store, const std::string& key) {
    std::optional<std::string> value;
    stores[store]->read_store([&](const Store& served) { value = served.value(key); });
    return value ? std::stoll(*value) : 0;
  }

  asio::io_context io;
  IoPool pool;
  std::vector<std::unique_ptr<StoreServer>> stores;
  std::thread thread;
};

}  // namespace

TEST_CASE("store server: two stores on one io pool loaded at once make progress together",
          "[component][store][threads]") {
  PooledServers servers(3, 2);
  const int kClientsEach = 3;
  const int kOps = 3000;
  std::vector<std::future<int>> loads;
  for (int i = 0; i < 2 * kClientsEach; ++i) {
    uint16_t port = servers.stores[i % 2]->port();
    loads.push_back(std::async(std::launch::async, add_in_a_loop, port, "/n", kOps));
  }
  // Whichever store's load ends first, the other had made progress by then: neither waited for
  // the other to be done.
  bool first_done_seen = false;
  uint64_t other_ops_when_first_done = 0;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    uint64_t ops[2] = {servers.stores[0]->operations(), servers.stores[1]->operations()};
    for (int store = 0; store < 2 && !first_done_seen; ++store) {
      if (ops[store] == kClientsEach * kOps) {
        first_done_seen = true;
        other_ops_when_first_done = ops[1 - store];
      }
    }
    if (ops[0] == kClientsEach * kOps && ops[1] == kClientsEach * kOps) break;
    std::this_thread::sleep_for(1ms);
  }
  for (auto& load : loads) CHECK(load.get() == kOps);
  CHECK(first_done_seen);
  CHECK(other_ops_when_first_done > 0);
  // Every ADD applied exactly once, whatever thread its connection was on.
  CHECK(servers.counter(0, "/n") == kClientsEach * kOps);
  CHECK(servers.counter(1, "/n") == kClientsEach * kOps);
}

TEST_CASE("store server: on an io pool a slow connection stalls no other",
          "[component][store][threads]") {
  PooledServers servers(2, 1);
  uint16_t port = servers.stores[0]->port();
  std::string big(1 << 20, 'v');
  RawClient setter(port);
  REQUIRE(setter.ask(request(StoreOp::Set, {"/big"}, {big}), 0).empty());
  REQUIRE(setter.ask(request(StoreOp::GetNumKeys), 8) == i64(1));
  // A client that asks for 48 MiB of replies and reads none (the server stops reading it past
  // its unsent limit), one that sends half of a request and stops, and one that sends nothing.
  RawClient hoarder(port, "127.0.0.1", 4096);
  std::string gets;
  for (int i = 0; i < 48; ++i) gets += request(StoreOp::Get, {"/big"});
  hoarder.send(gets);
  RawClient halfway(port);
  std::string half_set = request(StoreOp::Set, {"/half"}, {big});
  halfway.send(std::string_view(half_set).substr(0, 4096));
  RawClient silent(port);
  std::vector<std::future<int>> loads;
  for (int i = 0; i < 4; ++i) {
    loads.push_back(std::async(std::launch::async, add_in_a_loop, port, "/n", 500));
  }
  for (auto& load : loads) CHECK(load.get() == 500);
  CHECK(servers.counter(0, "/n") == 2000);
  // The slow ones are still served once they go on.
  for (int i = 0; i < 48; ++i) REQUIRE(hoarder.read(8 + big.size(), 20s) == bytes(big));
  halfway.send(std::string_view(half_set).substr(4096));
  CHECK(halfway.ask(request(StoreOp::Get, {"/half"}), 8 + big.size()) == bytes(big));
  CHECK(silent.ask(request(StoreOp::GetNumKeys), 8) == i64(3));
}

TEST_CASE("store server: a listen queue longer than one accept batch is drained and served",
          "[component][store][threads]") {
  PooledServers servers(3, 1);
  uint16_t port = servers.stores[0]->port();
  // Every thread (each has a listener) is held while the clients connect, so that they all wait
  // in the listen queues at once, more than a batch in each; let go however the case ends.
  struct Hold {
    std::promise<void> promise;
    bool released = false;
    void release() {
      if (!released) promise.set_value();
      released = true;
    }
    ~Hold() { release(); }
  } hold;
  std::shared_future<void> held = hold.promise.get_future().share();
  for (size_t i = 0; i < servers.pool.size(); ++i) {
    asio::post(servers.pool.context(i), [held] { held.wait(); });
  }
  const int kClients = 3 * 3 * StoreListener::kAcceptBatch + 5;
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(std::make_unique<RawClient>(port));
  CHECK(servers.stores[0]->connection_count() == 0);
  hold.release();
  REQUIRE(cohort::test::wait_until(
      [&] { return servers.stores[0]->connection_count() == static_cast<size_t>(kClients); }));
  std::set<std::string> replies;  // each connection answered, with a count of its own
  for (auto& client : clients) replies.insert(client->ask(request(StoreOp::Add, {"/n"}, {}, 1), 8));
  CHECK(replies.size() == static_cast<size_t>(kClients));
  CHECK(servers.counter(0, "/n") == kClients);
  clients.clear();
  CHECK(cohort::test::wait_until([&] { return servers.stores[0]->connection_count() == 0; }));
}

// Listening TCP sockets on `port`, as the kernel lists them (/proc/net/tcp and tcp6: local
// address:port in hex, state 0A is LISTEN).
int listeners_on(uint16_t port) {
  int count = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      size_t colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") continue;
      count += std::stoul(local.substr(colon + 1), nullptr, 16) == port;
    }
  }
  return count;
}

TEST_CASE("store server on a pool: a listener on each thread on one port and stop ends them all",
          "[component][store][threads]") {
  std::optional<PooledServers> servers;
  servers.emplace(3, 1);
  uint16_t port = servers->stores[0]->port();
  CHECK(listeners_on(port) == 3);
  // Connections land on every listener (the kernel picks by address and port): all are served.
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 48; ++i) {
    clients.push_back(std::make_unique<RawClient>(port));
    CHECK(clients.back()->ask(request(StoreOp::Add, {"/n"}, {}, 1), 8) == i64(i + 1));
  }
  // The port is taken: another store on it fails to start, pooled or not, rather than sharing it.
  {
    asio::io_context io;
    IoPool pool(io, 2);
    StoreServerOptions options;
    options.port = port;
    StoreServer alone(io, options);
    CHECK(alone.start() == boost::asio::error::address_in_use);
    options.io_pool = &pool;
    StoreServer pooled(io, options);
    CHECK(pooled.start() == boost::asio::error::address_in_use);
  }
  CHECK(listeners_on(port) == 3);
  // stop() (on the server's thread) ends every listener there and then, its own and the other
  // threads': the port is free for a new server at once, and open connections are closed.
  std::promise<void> stopped;
  asio::post(servers->io, [&] {
    servers->stores[0]->stop();
    stopped.set_value();
  });
  stopped.get_future().wait();
  CHECK(listeners_on(port) == 0);
  for (auto& client : clients) CHECK(client->closed_by_server(5s));
  asio::io_context io;
  StoreServerOptions options;
  options.port = port;
  StoreServer again(io, options);
  CHECK_FALSE(again.start());
  servers.reset();
}

TEST_CASE(
    "store server through io_uring: connections still open when the io threads end are closed "
    "with their contexts",
    "[component][store][threads]") {
  std::vector<std::unique_ptr<RawClient>> clients;
  {
    asio::io_context io;
    auto pool = std::make_unique<IoPool>(io, 2, SocketIo::IoUring);
    if (!pool->uses_io_uring()) WARN("io_uring is not usable here: this case ran through epoll");
    StoreServerOptions options;
    options.io_pool = pool.get();
    auto server = std::make_unique<StoreServer>(io, options);
    REQUIRE_FALSE(server->start());
    std::thread thread([&] { io.run(); });
    for (int i = 0; i < 4; ++i) {  // two on each context, each with a recv waiting in its ring
      clients.push_back(std::make_unique<RawClient>(server->port()));
      CHECK(clients.back()->ask(request(StoreOp::Add, {"/n"}, {}, 1), 8).size() == 8);
    }
    clients.back()->send(request(StoreOp::Add, {"/n"}, {}, 1).substr(0, 5));  // half a request
    asio::post(io, [&] { io.stop(); });
    thread.join();
    // Stopped with no thread to run the closes: the pool's contexts end with what their rings
    // hold, then the server's own.
    server.reset();
    pool.reset();
  }
  for (auto& client : clients) CHECK(client->closed_by_server(5s));
}

TEST_CASE(
    "store server through io_uring: busy connections move from epoll to the ring once two share "
    "a thread and keep their replies in order",
    "[component][store][threads]") {
  asio::io_context io;
  IoPool pool(io, 1, SocketIo::IoUring);
  if (!pool.uses_io_uring()) WARN("io_uring is not usable here: this case ran through epoll");
  pool.set_ring_after(3);
  StoreServerOptions options;
  options.io_pool = &pool;
  StoreServer server(io, options);
  REQUIRE_FALSE(server.start());
  std::thread thread([&] { io.run(); });
  UringLoop* ring = pool.ring_of(io);
  auto started = [&] { return ring != nullptr ? ring->started() : 0; };
  uint64_t before = started();
  RawClient first(server.port());
  RawClient second(server.port());
  RawClient waiter(server.port());
  waiter.send(request(StoreOp::Wait, {"/go"}));  // one request: stays on epoll
  int64_t count = 0;
  for (int i = 0; i < 4; ++i)
    CHECK(first.ask(request(StoreOp::Add, {"/n"}, {}, 1), 8) == i64(++count));
  if (ring != nullptr) CHECK(started() == before);  // busy, but alone: still through epoll
  for (int i = 0; i < 3; ++i)
    CHECK(second.ask(request(StoreOp::Add, {"/n"}, {}, 1), 8) == i64(++count));
  // The second is busy too: it moves; the first moves after its next request.
  CHECK(first.ask(request(StoreOp::Add, {"/n"}, {}, 1), 8) == i64(++count));
  if (ring != nullptr) CHECK(wait_until([&] { return started() >= before + 2; }));
  for (RawClient* client :
       {&first, &second}) {  // pipelined through the ring: every reply, in order
    std::string burst;
    for (int i = 0; i < 50; ++i) burst += request(StoreOp::Add, {"/n"}, {}, 1);
    client->send(burst);
    std::string replies = client->read(50 * 8);
    REQUIRE(replies.size() == 50 * 8);
    for (int i = 0; i < 50; ++i) CHECK(replies.substr(i * 8, 8) == i64(++count));
  }
  first.send(request(StoreOp::Set, {"/go"}, {"1"}));  // wakes the connection still on epoll
  CHECK(waiter.read(1) == hex("00"));
  first.close();
  CHECK(wait_until([&] { return server.connection_count() == 2; }));
  asio::post(io, [&] {
    server.stop();
    io.stop();
  });
  thread.join();
}
