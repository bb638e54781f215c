// store_bench: the worker-store benchmark's client load and PyTorch's reference server, driven by
// bench/store_bench.py to compare cohort's store server with PyTorch's own TCPStore server
// (LibTorch 1.13 c10d::TCPStore) under the same load. Modes: serve-torch (hosts PyTorch's
// server), load (N LibTorch clients doing set/get/add), storm (4096 raw-socket clients: ADD a
// counter, then all WAIT on the key the last one sets), bootstrap (N raw-socket ranks, each from
// its own loopback source address, doing what a rank does at NCCL bootstrap; driven by
// bench/store_storm.py) and idle (N idle connections). A benchmark, not a test: it measures and
// prints one JSON line; it asserts nothing about timing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <latch>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

namespace {

// True in serve-torch: bind() below then keeps PyTorch's server on the loopback address.
std::atomic<bool> loopback_only{false};

}  // namespace

// PyTorch 1.13's TCPServer always listens on the wildcard address (IPv6 first, then IPv4) and has
// no option for another. The benchmark's servers must bind 127.0.0.1 only, so this executable
// defines bind(2) itself (exported; libtorch's calls resolve to it first). In serve-torch it
// refuses the IPv6 wildcard, so that 1.13 falls back to IPv4, and turns 0.0.0.0 into 127.0.0.1.
extern "C" int bind(int fd, const sockaddr* address, socklen_t length) noexcept {
  if (loopback_only.load() && address != nullptr) {
    if (address->sa_family == AF_INET6 && length >= sizeof(sockaddr_in6)) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
      if (IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr)) {
        errno = EADDRNOTAVAIL;
        return -1;
      }
    }
    if (address->sa_family == AF_INET && length >= sizeof(sockaddr_in)) {
      sockaddr_in v4;
      std::memcpy(&v4, address, sizeof(v4));
      if (v4.sin_addr.s_addr == htonl(INADDR_ANY)) {
        v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return static_cast<int>(::syscall(SYS_bind, fd, &v4, sizeof(v4)));
      }
    }
  }
  return static_cast<int>(::syscall(SYS_bind, fd, address, length));
}

namespace cohort {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr const char* kHost = "127.0.0.1";

// PyTorch 1.13 opcodes (docs/tcpstore-protocol.md §2, legacy numbering).
constexpr uint8_t kOpSet = 0;
constexpr uint8_t kOpAdd = 3;
constexpr uint8_t kOpWait = 5;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Raises the soft descriptor limit to the hard one; returns the soft limit now in force.
rlim_t raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur;
}

// Blocks SIGTERM and SIGINT in every thread started after this call; wait_for_stop() takes them.
sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

int wait_for_stop(const sigset_t& signals) {
  int signal = 0;
  sigwait(&signals, &signal);
  return signal;
}

void write_port_file(const std::string& path, int port) {
  std::string temporary = path + ".tmp";
  std::ofstream(temporary) << port << "\n";
  std::rename(temporary.c_str(), path.c_str());
}

// ---- serve-torch ------------------------------------------------------------------------------

int serve_torch(int port, const std::string& port_file) {
  sigset_t signals = block_stop_signals();  // before LibTorch starts its server threads
  rlim_t files = raise_descriptor_limit();
  loopback_only = true;
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = true;
  options.numWorkers = c10::nullopt;
  options.waitWorkers = false;
  options.multiTenant = true;
  options.timeout = std::chrono::seconds(60);
  c10d::TCPStore store(kHost, options);
  std::cout << "{\"mode\":\"serve-torch\",\"port\":" << store.getPort() << ",\"nofile\":" << files
            << "}" << std::endl;
  if (!port_file.empty()) write_port_file(port_file, store.getPort());
  wait_for_stop(signals);
  return 0;
}

// ---- load -------------------------------------------------------------------------------------

enum class LoadOp { Set, Get, Add };
constexpr std::string_view kLoadOpNames[] = {"set", "get", "add"};

std::vector<LoadOp> parse_mix(const std::string& mix) {
  std::vector<LoadOp> ops;
  std::stringstream stream(mix);
  std::string name;
  while (std::getline(stream, name, '_')) {
    auto known = std::find(std::begin(kLoadOpNames), std::end(kLoadOpNames), name);
    if (known == std::end(kLoadOpNames)) {
      throw std::runtime_error("unknown op '" + name + "' in --mix");
    }
    ops.push_back(static_cast<LoadOp>(known - std::begin(kLoadOpNames)));
  }
  if (ops.empty()) throw std::runtime_error("empty --mix");
  return ops;
}

struct LoadThread {
  uint64_t ops = 0;
  std::array<std::vector<uint32_t>, 3> latencies_ns;  ///< by LoadOp, saturated at ~4.3 s
  Clock::time_point finished;
  std::string error;
};

// One client: its own c10d::TCPStore connection pair, its own keys. The first op of the cycle
// is always a set of the key that get reads (a get of an absent key would wait for it).
void run_load_client(int port, int index, const std::vector<LoadOp>& mix, const std::string& tag,
                     std::latch& ready, std::latch& go, const Clock::time_point& deadline,
                     LoadThread& out) {
  std::unique_ptr<c10d::TCPStore> store;
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(port);
    options.isServer = false;
    options.numWorkers = c10::nullopt;  // no "init/" ADD
    options.waitWorkers = false;
    options.timeout = std::chrono::seconds(60);
    store = std::make_unique<c10d::TCPStore>(kHost, options);
  } catch (const std::exception& error) {
    out.error = error.what();
  }
  ready.count_down();
  go.wait();
  if (!store) return;
  std::string prefix = "bench/" + tag + "/" + std::to_string(index) + "/";
  std::string value_key = prefix + "value";
  std::string counter_key = prefix + "counter";
  std::vector<uint8_t> value(64, 'v');
  std::vector<uint8_t> seen;
  for (auto& latencies : out.latencies_ns) latencies.reserve(1 << 15);
  try {
    for (size_t step = 0;; ++step) {
      auto start = Clock::now();
      if (start >= deadline) break;
      LoadOp op = mix[step % mix.size()];
      switch (op) {
        case LoadOp::Set:
          value[step % value.size()] = static_cast<uint8_t>('a' + step % 26);
          store->set(value_key, value);
          break;
        case LoadOp::Get:
          seen = store->get(value_key);
          break;
        case LoadOp::Add:
          store->add(counter_key, 1);
          break;
      }
      auto nanoseconds =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
      out.latencies_ns[static_cast<size_t>(op)].push_back(
          static_cast<uint32_t>(std::min<int64_t>(nanoseconds, UINT32_MAX)));
      ++out.ops;
    }
  } catch (const std::exception& error) {
    out.error = error.what();
  }
  out.finished = Clock::now();
}

// CPU seconds (user + system) of every thread of this process so far.
double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& time) { return time.tv_sec + time.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double percentile_us(std::vector<uint32_t>& samples, double fraction) {
  if (samples.empty()) return 0;
  size_t rank = std::min(samples.size() - 1, static_cast<size_t>(fraction * samples.size()));
  std::nth_element(samples.begin(), samples.begin() + static_cast<ptrdiff_t>(rank), samples.end());
  return samples[rank] / 1000.0;
}

int run_load(int port, int clients, double seconds, const std::string& mix_text) {
  raise_descriptor_limit();
  auto mix = parse_mix(mix_text);
  std::string tag = std::to_string(getpid());
  std::vector<LoadThread> results(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  std::latch ready(clients);
  std::latch go(1);
  Clock::time_point deadline;  // written before go opens, read after
  auto connect_start = Clock::now();
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back(run_load_client, port, i, std::cref(mix), std::cref(tag), std::ref(ready),
                         std::ref(go), std::cref(deadline), std::ref(results[i]));
  }
  ready.wait();
  double connect_s = seconds_since(connect_start);
  auto start = Clock::now();
  deadline = start + to_duration(seconds);
  double cpu_before = process_cpu_seconds();
  go.count_down();
  for (auto& thread : threads) thread.join();
  double client_cpu_s = process_cpu_seconds() - cpu_before;

  uint64_t ops = 0;
  Clock::time_point end = start;
  std::vector<uint32_t> latencies;
  std::array<std::vector<uint32_t>, 3> by_op;
  for (auto& result : results) {
    if (!result.error.empty()) {
      std::cerr << "store_bench load: client failed: " << result.error << "\n";
      return 1;
    }
    ops += result.ops;
    end = std::max(end, result.finished);
    for (size_t op = 0; op < by_op.size(); ++op) {
      auto& samples = result.latencies_ns[op];
      by_op[op].insert(by_op[op].end(), samples.begin(), samples.end());
      latencies.insert(latencies.end(), samples.begin(), samples.end());
    }
  }
  double elapsed = std::chrono::duration<double>(end - start).count();
  double p50 = percentile_us(latencies, 0.50);
  double p99 = percentile_us(latencies, 0.99);
  double max = latencies.empty() ? 0 : *std::max_element(latencies.begin(), latencies.end()) / 1e3;
  std::cout << "{\"mode\":\"load\",\"clients\":" << clients << ",\"mix\":\"" << mix_text
            << "\",\"ops\":" << ops << ",\"elapsed_s\":" << elapsed
            << ",\"ops_per_s\":" << (elapsed > 0 ? ops / elapsed : 0) << ",\"p50_us\":" << p50
            << ",\"p99_us\":" << p99 << ",\"max_us\":" << max << ",\"connect_s\":" << connect_s
            << ",\"client_cpu_us_per_op\":" << (ops > 0 ? client_cpu_s * 1e6 / ops : 0);
  for (size_t op = 0; op < by_op.size(); ++op) {
    if (by_op[op].empty()) continue;
    std::cout << ",\"" << kLoadOpNames[op] << "_p50_us\":" << percentile_us(by_op[op], 0.50)
              << ",\"" << kLoadOpNames[op] << "_p99_us\":" << percentile_us(by_op[op], 0.99);
  }
  std::cout << "}" << std::endl;
  return 0;
}

// ---- storm ------------------------------------------------------------------------------------

void put_u64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void put_bytes(std::string& out, std::string_view bytes) {
  put_u64(out, bytes.size());
  out.append(bytes);
}

std::string add_request(std::string_view key, int64_t delta, uint8_t op = kOpAdd) {
  std::string out(1, static_cast<char>(op));
  put_bytes(out, key);
  put_u64(out, static_cast<uint64_t>(delta));
  return out;
}

std::string set_request(std::string_view key, std::string_view value, uint8_t op = kOpSet) {
  std::string out(1, static_cast<char>(op));
  put_bytes(out, key);
  put_bytes(out, value);
  return out;
}

std::string wait_request(std::string_view key, uint8_t op = kOpWait) {
  std::string out(1, static_cast<char>(op));
  put_u64(out, 1);
  put_bytes(out, key);
  return out;
}

struct Storm {
  explicit Storm(asio::io_context& io) : io(io) {}

  asio::io_context& io;
  tcp::endpoint endpoint;
  int clients = 0;
  std::string counter_key;
  std::string go_key;
  std::vector<tcp::socket> sockets;  ///< kept open until every wait returned
  Clock::time_point start;
  int connected = 0;
  int added = 0;
  int released = 0;
  double connected_s = 0;  ///< when the last connect completed
  double added_s = 0;      ///< when the last ADD reply came
  double released_s = 0;   ///< when the last WAIT reply came
  uint64_t connect_retries = 0;
  std::string error;
};

// One storm client: connect (retrying a refused or reset connect), ADD the counter +1, and WAIT
// on the go key; the client whose ADD returns the client count SETs the go key first.
asio::awaitable<void> storm_client(Storm& storm, size_t index) {
  tcp::socket& socket = storm.sockets[index];
  boost::system::error_code error;
  for (;;) {
    co_await socket.async_connect(storm.endpoint, asio::redirect_error(asio::use_awaitable, error));
    if (!error) break;
    ++storm.connect_retries;
    boost::system::error_code ignored;
    socket.close(ignored);
    asio::steady_timer pause(storm.io, std::chrono::milliseconds(10));
    co_await pause.async_wait(asio::use_awaitable);
  }
  socket.set_option(tcp::no_delay(true));
  if (++storm.connected == storm.clients) storm.connected_s = seconds_since(storm.start);

  std::string request = add_request(storm.counter_key, 1);
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  uint8_t counter_bytes[8];
  co_await asio::async_read(socket, asio::buffer(counter_bytes), asio::use_awaitable);
  uint64_t counter = 0;
  for (int i = 7; i >= 0; --i) counter = (counter << 8) | counter_bytes[i];
  if (++storm.added == storm.clients) storm.added_s = seconds_since(storm.start);

  request = wait_request(storm.go_key);
  if (counter == static_cast<uint64_t>(storm.clients)) {
    request = set_request(storm.go_key, "go") + request;
  }
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  uint8_t reply = 0xFF;
  co_await asio::async_read(socket, asio::buffer(&reply, 1), asio::use_awaitable);
  if (reply != 0) throw std::runtime_error("WAIT answered " + std::to_string(reply));
  if (++storm.released == storm.clients) {
    storm.released_s = seconds_since(storm.start);
    storm.io.stop();
  }
}

int run_storm(int port, int clients, double timeout_s) {
  rlim_t files = raise_descriptor_limit();
  asio::io_context io(1);
  Storm storm(io);
  storm.endpoint = tcp::endpoint(asio::ip::make_address(kHost), static_cast<uint16_t>(port));
  storm.clients = clients;
  std::string tag = "storm/" + std::to_string(getpid()) + "/";
  storm.counter_key = tag + "init/";
  storm.go_key = tag + "go";
  for (int i = 0; i < clients; ++i) storm.sockets.emplace_back(io);

  asio::steady_timer limit(io, to_duration(timeout_s));
  limit.async_wait([&](const boost::system::error_code& error) {
    if (error) return;
    if (storm.error.empty()) storm.error = "timed out";
    io.stop();
  });
  storm.start = Clock::now();
  for (size_t i = 0; i < storm.sockets.size(); ++i) {
    asio::co_spawn(io, storm_client(storm, i), [&](std::exception_ptr failure) {
      if (!failure) return;
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& error) {
        if (storm.error.empty()) storm.error = error.what();
      }
    });
  }
  io.run();
  if (storm.released != clients) {
    std::cerr << "store_bench storm: " << storm.released << " of " << clients << " waits returned ("
              << storm.error << "); connected " << storm.connected << ", added " << storm.added
              << "\n";
    return 1;
  }
  std::cout << "{\"mode\":\"storm\",\"clients\":" << clients << ",\"total_s\":" << storm.released_s
            << ",\"connected_s\":" << storm.connected_s << ",\"added_s\":" << storm.added_s
            << ",\"connect_retries\":" << storm.connect_retries << ",\"nofile\":" << files << "}"
            << std::endl;
  return 0;
}

// ---- bootstrap --------------------------------------------------------------------------------

// The opcodes and handshake of one protocol dialect (docs/tcpstore-protocol.md §2 and §4).
struct Dialect {
  uint8_t set;
  uint8_t get;
  uint8_t add;
  uint8_t wait;
  bool validate;  ///< 2.2+: VALIDATE, then (2.5+) PING with its echo, before any request
};
constexpr Dialect kLegacyDialect{0, 2, 3, 5, false};
constexpr Dialect kValidateDialect{1, 3, 4, 6, true};
constexpr uint32_t kValidateMagic = 0x3C85F7CE;
constexpr uint8_t kOpValidate = 0;
constexpr uint8_t kOpPing = 13;
constexpr size_t kUniqueIdBytes = 128;  // ncclUniqueId

void put_u32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

uint64_t get_u64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

// The loopback source address of rank `rank`: 127.0.a.b with a and b in 1..250, so 62,500 ranks
// get distinct addresses and none of them runs out of ephemeral ports.
asio::ip::address_v4 source_address(int rank) {
  uint32_t a = 1 + static_cast<uint32_t>(rank / 250) % 250;
  uint32_t b = 1 + static_cast<uint32_t>(rank % 250);
  return asio::ip::address_v4((127u << 24) | (a << 8) | b);
}

struct Bootstrap {
  explicit Bootstrap(asio::io_context& io) : io(io) {}

  asio::io_context& io;
  tcp::endpoint server;
  int ranks = 0;
  Dialect dialect = kLegacyDialect;
  bool one_source = false;  ///< every rank from 127.0.0.1 (no bind), the control
  std::string uid_key;
  std::string uid_value;
  std::string counter_key;
  std::string barrier_key;
  std::string done_key;
  std::vector<tcp::socket> sockets;  ///< kept open until every rank is done
  std::vector<double> connect_s;     ///< per rank: when its connect completed
  std::vector<double> done_s;        ///< per rank: when its last WAIT returned
  Clock::time_point start;
  Clock::time_point last_progress;
  int connected = 0;
  int added = 0;
  int got = 0;
  int arrived = 0;
  int done = 0;
  int lost = 0;  ///< connections that failed after connect (reset, closed, bad reply)
  double connected_s = 0;
  double added_s = 0;
  double got_s = 0;
  double arrived_s = 0;
  double finished_s = 0;
  uint64_t connect_retries = 0;
  std::vector<std::string> errors;  ///< the first few distinct ones

  void note_error(const std::string& what) {
    if (errors.size() < 4 && std::find(errors.begin(), errors.end(), what) == errors.end()) {
      errors.push_back(what);
    }
  }
  void progress(int& count, double& when) {
    last_progress = Clock::now();
    if (++count == ranks) when = seconds_since(start);
  }
};

// Connects rank `rank`'s socket from its own source address; a refused, reset or timed-out
// connect is retried after a pause (what a rank does until its store timeout).
asio::awaitable<void> bootstrap_connect(Bootstrap& run, int rank) {
  tcp::socket& socket = run.sockets[static_cast<size_t>(rank)];
  tcp::endpoint source(source_address(rank), 0);
  for (;;) {
    boost::system::error_code error;
    socket.open(tcp::v4(), error);
    if (!error && !run.one_source) {
      // Leave the port to connect(): bind() alone would reserve one per address for any peer.
      int on = 1;
      ::setsockopt(socket.native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &on, sizeof(on));
      socket.bind(source, error);
    }
    if (error)
      throw std::runtime_error("socket/bind " + source.address().to_string() + ": " +
                               error.message());
    co_await socket.async_connect(run.server, asio::redirect_error(asio::use_awaitable, error));
    if (!error) co_return;
    ++run.connect_retries;
    run.note_error("connect: " + error.message());
    boost::system::error_code ignored;
    socket.close(ignored);
    asio::steady_timer pause(run.io, std::chrono::milliseconds(100 + rank % 100));
    co_await pause.async_wait(asio::use_awaitable);
  }
}

// One rank, as at NCCL bootstrap over a TCPStore: (2.x: VALIDATE + PING), rank 0 SETs the
// unique id, every rank ADDs the init counter, WAITs for and GETs the unique id, then the
// barrier: ADD the barrier counter, the last to arrive SETs the done key, all WAIT on it.
asio::awaitable<void> bootstrap_rank(Bootstrap& run, int rank) {
  co_await bootstrap_connect(run, rank);
  tcp::socket& socket = run.sockets[static_cast<size_t>(rank)];
  run.connect_s[static_cast<size_t>(rank)] = seconds_since(run.start);
  run.progress(run.connected, run.connected_s);
  socket.set_option(tcp::no_delay(true));
  const Dialect& op = run.dialect;

  std::string request;
  if (op.validate) {
    request.push_back(static_cast<char>(kOpValidate));
    put_u32(request, kValidateMagic);
    request.push_back(static_cast<char>(kOpPing));
    put_u32(request, static_cast<uint32_t>(rank));
    co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
    uint8_t echo[4];
    co_await asio::async_read(socket, asio::buffer(echo), asio::use_awaitable);
    uint32_t nonce = echo[0] | echo[1] << 8 | echo[2] << 16 | static_cast<uint32_t>(echo[3]) << 24;
    if (nonce != static_cast<uint32_t>(rank)) throw std::runtime_error("wrong PING echo");
    request.clear();
  }
  if (rank == 0) request = set_request(run.uid_key, run.uid_value, op.set);
  request += add_request(run.counter_key, 1, op.add);
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  uint8_t number[8];
  co_await asio::async_read(socket, asio::buffer(number), asio::use_awaitable);
  run.progress(run.added, run.added_s);

  // get(): WAIT for the key, then GET it.
  request = wait_request(run.uid_key, op.wait);
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  uint8_t reply = 0xFF;
  co_await asio::async_read(socket, asio::buffer(&reply, 1), asio::use_awaitable);
  if (reply != 0) throw std::runtime_error("WAIT answered " + std::to_string(reply));
  request = std::string(1, static_cast<char>(op.get));
  put_bytes(request, run.uid_key);
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  co_await asio::async_read(socket, asio::buffer(number), asio::use_awaitable);
  if (get_u64(number) != run.uid_value.size()) throw std::runtime_error("GET: wrong length");
  std::string value(run.uid_value.size(), '\0');
  co_await asio::async_read(socket, asio::buffer(value), asio::use_awaitable);
  if (value != run.uid_value) throw std::runtime_error("GET: wrong unique id");
  run.progress(run.got, run.got_s);

  request = add_request(run.barrier_key, 1, op.add);
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  co_await asio::async_read(socket, asio::buffer(number), asio::use_awaitable);
  run.progress(run.arrived, run.arrived_s);
  request = wait_request(run.done_key, op.wait);
  if (get_u64(number) == static_cast<uint64_t>(run.ranks)) {
    request = set_request(run.done_key, "1", op.set) + request;
  }
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  co_await asio::async_read(socket, asio::buffer(&reply, 1), asio::use_awaitable);
  if (reply != 0) throw std::runtime_error("WAIT answered " + std::to_string(reply));
  run.done_s[static_cast<size_t>(rank)] = seconds_since(run.start);
  run.progress(run.done, run.finished_s);
  if (run.done == run.ranks) run.io.stop();
}

// The value at `fraction` of the sorted samples (0 where there are none).
double quantile(std::vector<double> samples, double fraction) {
  samples.erase(std::remove(samples.begin(), samples.end(), -1.0), samples.end());
  if (samples.empty()) return 0;
  size_t rank = std::min(samples.size() - 1, static_cast<size_t>(fraction * samples.size()));
  std::nth_element(samples.begin(), samples.begin() + static_cast<ptrdiff_t>(rank), samples.end());
  return samples[rank];
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(c) >= 0x20) out.push_back(c);
  }
  return out + "\"";
}

// Exit status 0 when every rank finished, 3 when not (timed out, or stuck after a lost rank);
// the JSON line is printed either way.
int run_bootstrap(int port, int ranks, const std::string& dialect, bool one_source,
                  double timeout_s) {
  rlim_t files = raise_descriptor_limit();
  asio::io_context io(1);
  Bootstrap run(io);
  run.server = tcp::endpoint(asio::ip::make_address(kHost), static_cast<uint16_t>(port));
  run.ranks = ranks;
  run.dialect = dialect == "2" ? kValidateDialect : kLegacyDialect;
  run.one_source = one_source;
  std::string tag = "/bootstrap/" + std::to_string(getpid()) + "/";
  run.uid_key = tag + "nccl/unique_id";
  run.uid_value.resize(kUniqueIdBytes);
  for (size_t i = 0; i < kUniqueIdBytes; ++i) run.uid_value[i] = static_cast<char>(i * 37 + 11);
  run.counter_key = tag + "init/";
  run.barrier_key = tag + "barrier/count";
  run.done_key = tag + "barrier/done";
  run.connect_s.assign(static_cast<size_t>(ranks), -1.0);
  run.done_s.assign(static_cast<size_t>(ranks), -1.0);
  for (int i = 0; i < ranks; ++i) run.sockets.emplace_back(io);

  bool timed_out = false;
  bool stuck = false;
  asio::steady_timer limit(io, to_duration(timeout_s));
  limit.async_wait([&](const boost::system::error_code& error) {
    if (error) return;
    timed_out = true;
    io.stop();
  });
  // A lost rank means the barrier can never complete: stop once nothing moved for 5 s.
  asio::steady_timer watch(io);
  std::function<void()> check = [&] {
    watch.expires_after(std::chrono::seconds(1));
    watch.async_wait([&](const boost::system::error_code& error) {
      if (error) return;
      if (run.lost > 0 && Clock::now() - run.last_progress > std::chrono::seconds(5)) {
        stuck = true;
        io.stop();
        return;
      }
      check();
    });
  };
  check();

  double cpu_before = process_cpu_seconds();
  run.start = run.last_progress = Clock::now();
  for (int i = 0; i < ranks; ++i) {
    asio::co_spawn(io, bootstrap_rank(run, i), [&](std::exception_ptr failure) {
      if (!failure) return;
      ++run.lost;
      run.last_progress = Clock::now();
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& error) {
        run.note_error(error.what());
      }
    });
  }
  io.run();
  double elapsed_s = seconds_since(run.start);
  double client_cpu_s = process_cpu_seconds() - cpu_before;
  bool complete = run.done == ranks;

  std::ostringstream out;
  out << "{\"mode\":\"bootstrap\",\"ranks\":" << ranks << ",\"dialect\":" << json_string(dialect)
      << ",\"one_source\":" << (one_source ? "true" : "false")
      << ",\"complete\":" << (complete ? "true" : "false")
      << ",\"timed_out\":" << (timed_out ? "true" : "false")
      << ",\"stuck\":" << (stuck ? "true" : "false") << ",\"elapsed_s\":" << elapsed_s
      << ",\"connected\":" << run.connected << ",\"added\":" << run.added << ",\"got\":" << run.got
      << ",\"arrived\":" << run.arrived << ",\"done\":" << run.done << ",\"lost\":" << run.lost
      << ",\"connect_retries\":" << run.connect_retries;
  if (run.connected == ranks) out << ",\"connected_s\":" << run.connected_s;
  if (run.added == ranks) out << ",\"added_s\":" << run.added_s;
  if (run.got == ranks) out << ",\"got_s\":" << run.got_s;
  if (run.arrived == ranks) out << ",\"arrived_s\":" << run.arrived_s;
  if (complete) out << ",\"done_s\":" << run.finished_s;
  out << ",\"connect_p50_s\":" << quantile(run.connect_s, 0.5)
      << ",\"connect_p99_s\":" << quantile(run.connect_s, 0.99)
      << ",\"done_p50_s\":" << quantile(run.done_s, 0.5)
      << ",\"done_p99_s\":" << quantile(run.done_s, 0.99) << ",\"client_cpu_s\":" << client_cpu_s
      << ",\"nofile\":" << files << ",\"errors\":[";
  for (size_t i = 0; i < run.errors.size(); ++i) {
    out << (i > 0 ? "," : "") << json_string(run.errors[i]);
  }
  out << "]}";
  std::cout << out.str() << std::endl;
  return complete ? 0 : 3;
}

// ---- idle -------------------------------------------------------------------------------------

int run_idle(int port, int clients) {
  sigset_t signals = block_stop_signals();
  rlim_t files = raise_descriptor_limit();
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> descriptors;
  auto start = Clock::now();
  for (int i = 0; i < clients; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      std::cerr << "store_bench idle: connection " << i << ": " << std::strerror(errno)
                << " (descriptor limit " << files << ")\n";
      return 1;
    }
    descriptors.push_back(fd);
  }
  std::cout << "{\"mode\":\"idle\",\"clients\":" << clients
            << ",\"connect_s\":" << seconds_since(start) << ",\"nofile\":" << files << "}"
            << std::endl;
  wait_for_stop(signals);
  for (int fd : descriptors) ::close(fd);
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  CLI::App app{"store_bench: worker-store benchmark modes (driven by bench/store_bench.py)"};
  app.require_subcommand(1);
  int port = 0;
  int clients = 1;
  double seconds = 3;
  double timeout = 120;
  std::string port_file;
  std::string mix = "set_get_add";

  auto* serve = app.add_subcommand("serve-torch", "Host PyTorch's TCPStore server until SIGTERM");
  serve->add_option("--port", port, "Port (0: any free port)");
  serve->add_option("--port-file", port_file, "Write the bound port to this file");
  auto* load = app.add_subcommand("load", "N LibTorch clients doing a set/get/add mix");
  load->add_option("--port", port)->required();
  load->add_option("--clients", clients)->check(CLI::Range(1, 4096));
  load->add_option("--seconds", seconds)->check(CLI::Range(0.1, 600.0));
  load->add_option("--mix", mix, "Ops cycled by every client, e.g. set_get_add");
  auto* storm = app.add_subcommand("storm", "Connection storm: ADD a counter, WAIT on one key");
  storm->add_option("--port", port)->required();
  storm->add_option("--clients", clients)->check(CLI::Range(1, 65536));
  storm->add_option("--timeout", timeout, "Give up after this many seconds");
  std::string dialect = "1.13";
  auto* bootstrap = app.add_subcommand(
      "bootstrap", "Bootstrap storm: N ranks from many source addresses set/add/get/barrier");
  bootstrap->add_option("--port", port)->required();
  bootstrap->add_option("--ranks", clients)->check(CLI::Range(1, 62500));
  bootstrap->add_option("--dialect", dialect, "Protocol: 1.13 (legacy) or 2 (VALIDATE + PING)")
      ->check(CLI::IsMember({"1.13", "2"}));
  bool one_source = false;
  bootstrap->add_flag("--one-source", one_source,
                      "Connect every rank from 127.0.0.1 (default: 127.0.1.1 .. 127.0.250.250)");
  bootstrap->add_option("--timeout", timeout, "Stop after this many seconds");
  auto* idle = app.add_subcommand("idle", "Hold N idle connections until SIGTERM");
  idle->add_option("--port", port)->required();
  idle->add_option("--clients", clients)->check(CLI::Range(1, 65536));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  }
  try {
    if (serve->parsed()) return cohort::serve_torch(port, port_file);
    if (load->parsed()) return cohort::run_load(port, clients, seconds, mix);
    if (storm->parsed()) return cohort::run_storm(port, clients, timeout);
    if (bootstrap->parsed())
      return cohort::run_bootstrap(port, clients, dialect, one_source, timeout);
    return cohort::run_idle(port, clients);
  } catch (const std::exception& error) {
    std::cerr << "store_bench: " << error.what() << "\n";
    return 1;
  }
}
