// bootstrap_storm: N ranks hit a worker store at once, as at NCCL bootstrap, each connecting from
// its own loopback source address (127.0.1.1 .. 127.0.250.250, so ephemeral ports never run
// out), in one process on one Asio thread (or --client-threads of them, each with an io_context of
// its own and every Nth rank, so that on a machine with many cores the client is not the floor)
// with raw sockets: rank 0 SETs a 128-byte unique id, every rank ADDs the init counter, WAITs for
// and GETs the unique id, then the barrier (ADD a counter, the last to arrive SETs the done key,
// all WAIT on it). Speaks the 1.13 dialect or the 2.x one (VALIDATE + PING first). Driven by
// bench/store_storm.py; needs no LibTorch, so it runs wherever cohortd does (a GPU node too). A
// benchmark, not a test: it prints one JSON line and asserts nothing about timing; exit status 0
// when every rank finished, 3 when not.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <functional>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_support.hpp"

namespace cohort::bench {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

constexpr const char* kHost = "127.0.0.1";

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

// The loopback source address of rank `rank`: 127.0.a.b with a and b in 1..250, so 62,500 ranks
// get distinct addresses and none of them runs out of ephemeral ports.
asio::ip::address_v4 source_address(int rank) {
  uint32_t a = 1 + static_cast<uint32_t>(rank / 250) % 250;
  uint32_t b = 1 + static_cast<uint32_t>(rank % 250);
  return asio::ip::address_v4((127u << 24) | (a << 8) | b);
}

// One storm's settings and counts. The counts, the errors and last_progress are shared by the
// ranks' coroutines, which run on every client thread: they are taken under `mutex`. Rank r runs
// on contexts[r % contexts.size()], each context on a thread of its own.
struct Bootstrap {
  explicit Bootstrap(int threads) {
    for (int i = 0; i < threads; ++i) contexts.emplace_back(1);  // one thread runs each
  }

  std::deque<asio::io_context> contexts;
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
  std::mutex mutex;

  /// One more rank reached `count`'s step; true for the last of them.
  bool progress(int& count, double& when) {
    std::lock_guard lock(mutex);
    last_progress = Clock::now();
    if (++count != ranks) return false;
    when = seconds_since(start);
    return true;
  }
  void connect_failed(const std::string& what) {
    std::lock_guard lock(mutex);
    ++connect_retries;
    remember(what);
  }
  void rank_lost(const std::string& what) {
    std::lock_guard lock(mutex);
    ++lost;
    last_progress = Clock::now();
    remember(what);
  }
  /// A rank was lost and nothing moved for 5 s: the barrier can never complete.
  bool stuck() {
    std::lock_guard lock(mutex);
    return lost > 0 && Clock::now() - last_progress > std::chrono::seconds(5);
  }
  asio::io_context& context_of(int rank) {
    return contexts[static_cast<size_t>(rank) % contexts.size()];
  }
  void stop() {
    for (auto& context : contexts) context.stop();
  }

 private:
  void remember(const std::string& what) {
    if (errors.size() < 4 && std::find(errors.begin(), errors.end(), what) == errors.end()) {
      errors.push_back(what);
    }
  }
};

// Opens rank `rank`'s socket and binds it to the rank's own source address (the port is left to
// connect(): bind() alone would reserve one per address for any peer). Done for every rank
// before the clock starts, as a rank's process has its socket before it reaches the store; throws
// where the machine refuses one.
void open_rank_socket(Bootstrap& run, int rank) {
  tcp::socket& socket = run.sockets[static_cast<size_t>(rank)];
  tcp::endpoint source(source_address(rank), 0);
  boost::system::error_code error;
  socket.open(tcp::v4(), error);
  if (!error && !run.one_source) {
    int on = 1;
    ::setsockopt(socket.native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &on, sizeof(on));
    socket.bind(source, error);
  }
  if (error) {
    throw std::runtime_error("socket/bind " + source.address().to_string() + ": " +
                             error.message());
  }
}

// Connects rank `rank`'s opened socket; a refused, reset or timed-out connect is retried on a
// fresh socket after a pause (what a rank does until its store timeout).
asio::awaitable<void> bootstrap_connect(Bootstrap& run, int rank) {
  tcp::socket& socket = run.sockets[static_cast<size_t>(rank)];
  for (;;) {
    boost::system::error_code error;
    co_await socket.async_connect(run.server, asio::redirect_error(asio::use_awaitable, error));
    if (!error) co_return;
    run.connect_failed("connect: " + error.message());
    boost::system::error_code ignored;
    socket.close(ignored);
    asio::steady_timer pause(run.context_of(rank), std::chrono::milliseconds(100 + rank % 100));
    co_await pause.async_wait(asio::use_awaitable);
    open_rank_socket(run, rank);
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
  if (rank == 0) request = set_request(op.set, run.uid_key, run.uid_value);
  request += add_request(op.add, run.counter_key, 1);
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  uint8_t number[8];
  co_await asio::async_read(socket, asio::buffer(number), asio::use_awaitable);
  run.progress(run.added, run.added_s);

  // get(): WAIT for the key, then GET it.
  request = wait_request(op.wait, run.uid_key);
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

  request = add_request(op.add, run.barrier_key, 1);
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  co_await asio::async_read(socket, asio::buffer(number), asio::use_awaitable);
  run.progress(run.arrived, run.arrived_s);
  request = wait_request(op.wait, run.done_key);
  if (get_u64(number) == static_cast<uint64_t>(run.ranks)) {
    request = set_request(op.set, run.done_key, "1") + request;
  }
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  co_await asio::async_read(socket, asio::buffer(&reply, 1), asio::use_awaitable);
  if (reply != 0) throw std::runtime_error("WAIT answered " + std::to_string(reply));
  run.done_s[static_cast<size_t>(rank)] = seconds_since(run.start);
  if (run.progress(run.done, run.finished_s)) run.stop();
}

// Exit status 0 when every rank finished, 3 when not (timed out, or stuck after a lost rank);
// the JSON line is printed either way.
int run_bootstrap(int port, int ranks, const std::string& dialect, bool one_source,
                  double timeout_s, int client_threads) {
  rlim_t files = raise_descriptor_limit();
  Bootstrap run(client_threads);
  asio::io_context& io = run.contexts.front();
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
  for (int i = 0; i < ranks; ++i) {
    run.sockets.emplace_back(run.context_of(i));
    open_rank_socket(run, i);
  }

  bool timed_out = false;
  bool stuck = false;
  asio::steady_timer limit(io, to_duration(timeout_s));
  limit.async_wait([&](const boost::system::error_code& error) {
    if (error) return;
    timed_out = true;
    run.stop();
  });
  // A lost rank means the barrier can never complete: stop once nothing moved for 5 s.
  asio::steady_timer watch(io);
  std::function<void()> check = [&] {
    watch.expires_after(std::chrono::seconds(1));
    watch.async_wait([&](const boost::system::error_code& error) {
      if (error) return;
      if (run.stuck()) {
        stuck = true;
        run.stop();
        return;
      }
      check();
    });
  };
  check();

  double cpu_before = process_cpu_seconds();
  run.start = run.last_progress = Clock::now();
  for (int i = 0; i < ranks; ++i) {
    asio::co_spawn(run.context_of(i), bootstrap_rank(run, i), [&](std::exception_ptr failure) {
      if (!failure) return;
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& error) {
        run.rank_lost(error.what());
      }
    });
  }
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < run.contexts.size(); ++i) {
    helpers.emplace_back([&run, i] { run.contexts[i].run(); });
  }
  io.run();
  for (auto& helper : helpers) helper.join();
  double elapsed_s = seconds_since(run.start);
  double client_cpu_s = process_cpu_seconds() - cpu_before;
  bool complete = run.done == ranks;

  std::ostringstream out;
  out << "{\"mode\":\"bootstrap\",\"ranks\":" << ranks << ",\"dialect\":" << json_string(dialect)
      << ",\"one_source\":" << (one_source ? "true" : "false")
      << ",\"client_threads\":" << client_threads
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

}  // namespace
}  // namespace cohort::bench

int main(int argc, char** argv) {
  CLI::App app{
      "bootstrap_storm: N ranks bootstrap over one worker store at once "
      "(driven by bench/store_storm.py)"};
  int port = 0;
  int ranks = 1000;
  double timeout = 120;
  std::string dialect = "1.13";
  bool one_source = false;
  int client_threads = 1;
  app.add_option("--port", port, "The store's port on 127.0.0.1")
      ->required()
      ->check(CLI::Range(1, 65535));
  app.add_option("--ranks", ranks, "Ranks, each its own connection")->check(CLI::Range(1, 62500));
  app.add_option("--dialect", dialect, "Protocol: 1.13 (legacy) or 2 (VALIDATE + PING)")
      ->check(CLI::IsMember({"1.13", "2"}));
  app.add_flag("--one-source", one_source,
               "Connect every rank from 127.0.0.1 (default: 127.0.1.1 .. 127.0.250.250)");
  app.add_option("--timeout", timeout, "Stop after this many seconds")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--client-threads", client_threads,
                 "Threads that run the ranks (an Asio io_context each); default 1")
      ->check(CLI::Range(1, 64));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  }
  try {
    return cohort::bench::run_bootstrap(port, ranks, dialect, one_source, timeout, client_threads);
  } catch (const std::exception& error) {
    std::cerr << "bootstrap_storm: " << error.what() << "\n";
    return 1;
  }
}
