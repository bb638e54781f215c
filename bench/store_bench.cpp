// store_bench: the worker-store benchmark's client load and PyTorch's reference server, driven by
// bench/store_bench.py to compare cohort's store server with PyTorch's own TCPStore server
// (LibTorch 1.13 c10d::TCPStore) under the same load. Modes: serve-torch (hosts PyTorch's
// server), load (N LibTorch clients doing set/get/add), storm (4096 raw-socket clients: ADD a
// counter, then all WAIT on the key the last one sets) and idle (N idle connections). The
// bootstrap storm, which needs no LibTorch, is bench/bootstrap_storm.cpp. A benchmark, not a
// test: it measures and prints one JSON line; it asserts nothing about timing.
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

#include "bench/bench_support.hpp"

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
using namespace bench;

constexpr const char* kHost = "127.0.0.1";

// PyTorch 1.13 opcodes (docs/tcpstore-protocol.md §2, legacy numbering).
constexpr uint8_t kOpSet = 0;
constexpr uint8_t kOpAdd = 3;
constexpr uint8_t kOpWait = 5;

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

  std::string request = add_request(kOpAdd, storm.counter_key, 1);
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  uint8_t counter_bytes[8];
  co_await asio::async_read(socket, asio::buffer(counter_bytes), asio::use_awaitable);
  uint64_t counter = get_u64(counter_bytes);
  if (++storm.added == storm.clients) storm.added_s = seconds_since(storm.start);

  request = wait_request(kOpWait, storm.go_key);
  if (counter == static_cast<uint64_t>(storm.clients)) {
    request = set_request(kOpSet, storm.go_key, "go") + request;
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
    return cohort::run_idle(port, clients);
  } catch (const std::exception& error) {
    std::cerr << "store_bench: " << error.what() << "\n";
    return 1;
  }
}
