// The worker store's hot path allocates nothing per request once a connection is warm: SET, GET,
// ADD, WAIT and CHECK of keys that exist, in both dialects, with the connections on one io thread
// and spread over three. This executable replaces malloc and its family for the whole process to
// count the blocks that every thread but the client's asks for (hence an executable of its own,
// never built with a sanitizer, which replaces malloc itself).
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/io_pool.hpp"
#include "store/store_server.hpp"
#include "store/tcpstore_codec.hpp"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* block, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* block);
}

namespace {

std::atomic<uint64_t> counted_allocations{0};
thread_local bool uncounted_thread = false;  // set by the client's thread

void count() {
  if (!uncounted_thread) counted_allocations.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

extern "C" {
void* malloc(size_t size) {
  count();
  return __libc_malloc(size);
}
void* calloc(size_t count_of, size_t size) {
  count();
  return __libc_calloc(count_of, size);
}
void* realloc(void* block, size_t size) {
  count();
  return __libc_realloc(block, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}
void* memalign(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** block, size_t alignment, size_t size) {
  count();
  *block = __libc_memalign(alignment, size);
  return *block != nullptr ? 0 : ENOMEM;
}
void free(void* block) { __libc_free(block); }
}

using namespace cohort;
namespace asio = boost::asio;

namespace {

constexpr int kWarmRounds = 300;
constexpr int kCountedRounds = 2000;
const std::string kKey(40, 'k');          // longer than a short string's inline bytes
const std::string kValue(128, 'v');       // an NCCL unique id's size
const std::string kCounter = "/counter";  // kept short: ADD's digits stay inline either way

std::string encode(StoreNumbering numbering, StoreOp op, std::vector<std::string> keys,
                   std::vector<std::string> values = {}, int64_t number = 0) {
  std::string out;
  REQUIRE(
      append_request(out, StoreRequest{op, std::move(keys), std::move(values), number}, numbering));
  return out;
}

// One blocking client connection; requests and replies in buffers made before counting starts.
class Client {
 public:
  Client(uint16_t port, StoreNumbering numbering) : numbering_(numbering) {
    descriptor_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(descriptor_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(descriptor_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    int on = 1;
    ::setsockopt(descriptor_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    if (numbering == StoreNumbering::Validated) {
      exchange(encode(numbering, StoreOp::Validate, {}, {}, kStoreValidateMagic), 0);
    }
    set_and_get_ =
        encode(numbering, StoreOp::Set, {kKey}, {kValue}) + encode(numbering, StoreOp::Get, {kKey});
    add_ = encode(numbering, StoreOp::Add, {kCounter}, {}, 1);
    wait_ = encode(numbering, StoreOp::Wait, {kKey});
    check_ = encode(numbering, StoreOp::Check, {kKey, kCounter});
    reply_.resize(8 + kValue.size());
  }
  ~Client() { ::close(descriptor_); }

  /// SET then GET (SET has no reply), ADD, WAIT and CHECK, each answered before the next.
  void round() {
    exchange(set_and_get_, 8 + kValue.size());
    exchange(add_, 8);
    exchange(wait_, 1);
    exchange(check_, 1);
  }

 private:
  void exchange(const std::string& request, size_t reply_bytes) {
    REQUIRE(::send(descriptor_, request.data(), request.size(), 0) ==
            static_cast<ssize_t>(request.size()));
    size_t got = 0;
    while (got < reply_bytes) {
      ssize_t n = ::recv(descriptor_, reply_.data() + got, reply_bytes - got, 0);
      REQUIRE(n > 0);
      got += static_cast<size_t>(n);
    }
  }

  StoreNumbering numbering_;
  int descriptor_ = -1;
  std::string set_and_get_, add_, wait_, check_, reply_;
};

// A StoreServer on its own io thread, its connections on `threads` io threads in all.
class Server {
 public:
  explicit Server(int threads, SocketIo io = SocketIo::Epoll)
      : pool_(threads > 1 || io != SocketIo::Epoll ? std::make_unique<IoPool>(io_, threads, io)
                                                   : nullptr),
        server_(io_, options()) {
    if (pool_) pool_->set_ring_after(0);  // through the ring from the first request
    REQUIRE(!server_.start());
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Server() {
    asio::post(io_, [this] {
      server_.stop();
      io_.stop();
    });
    thread_.join();
  }
  uint16_t port() const { return server_.port(); }
  bool uses_io_uring() const { return pool_ && pool_->uses_io_uring(); }

 private:
  StoreServerOptions options() {
    StoreServerOptions options;
    options.io_pool = pool_.get();
    return options;
  }

  asio::io_context io_;
  std::unique_ptr<IoPool> pool_;
  StoreServer server_;
  std::thread thread_;
};

// The blocks the server's threads allocated while `clients` did kCountedRounds warm rounds each.
uint64_t allocations_while_serving(std::vector<std::unique_ptr<Client>>& clients) {
  for (int i = 0; i < kWarmRounds; ++i) {
    for (auto& client : clients) client->round();
  }
  uint64_t before = counted_allocations.load();
  for (int i = 0; i < kCountedRounds; ++i) {
    for (auto& client : clients) client->round();
  }
  return counted_allocations.load() - before;
}

struct UncountedThread {
  UncountedThread() { uncounted_thread = true; }
  ~UncountedThread() { uncounted_thread = false; }
};

}  // namespace

TEST_CASE("alloc: the counter sees other threads and not the client's", "[alloc]") {
  UncountedThread client_thread;
  uint64_t before = counted_allocations.load();
  auto own = std::make_unique<std::string>(100, 'x');
  CHECK(counted_allocations.load() == before);
  std::thread other([] { auto block = std::make_unique<std::string>(100, 'x'); });
  other.join();
  CHECK(counted_allocations.load() > before);
}

TEST_CASE("alloc: a warm connection's SET GET ADD WAIT and CHECK allocate nothing per request",
          "[alloc][store]") {
  auto numbering = GENERATE(StoreNumbering::Legacy113, StoreNumbering::Validated);
  Server server(1);
  UncountedThread client_thread;
  std::vector<std::unique_ptr<Client>> clients;
  clients.push_back(std::make_unique<Client>(server.port(), numbering));
  uint64_t allocations = allocations_while_serving(clients);
  INFO("requests: " << kCountedRounds * 5 << ", allocations: " << allocations);
  CHECK(allocations <= 10);
}

TEST_CASE("alloc: connections spread over three io threads allocate nothing per request",
          "[alloc][store]") {
  Server server(3);
  UncountedThread client_thread;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<Client>(server.port(), StoreNumbering::Validated));
  }
  uint64_t allocations = allocations_while_serving(clients);
  INFO("requests: " << 3 * kCountedRounds * 5 << ", allocations: " << allocations);
  CHECK(allocations <= 30);
}

TEST_CASE("alloc: connections served through io_uring allocate nothing per request",
          "[alloc][store]") {
  auto threads = GENERATE(1, 3);
  Server server(threads, SocketIo::IoUring);
  if (!server.uses_io_uring()) WARN("io_uring is not usable here: this case ran through epoll");
  UncountedThread client_thread;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<Client>(server.port(), StoreNumbering::Validated));
  }
  uint64_t allocations = allocations_while_serving(clients);
  INFO("threads: " << threads << ", requests: " << 3 * kCountedRounds * 5
                   << ", allocations: " << allocations);
  CHECK(allocations <= 30);
}
