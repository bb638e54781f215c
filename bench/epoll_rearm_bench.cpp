// epoll_rearm_bench: what the re-arm of an epoll connection costs a store server, without the
// store. One server thread answers N client threads (32-byte requests, 32-byte replies over
// loopback TCP) in one of three ways, and prints the server thread's CPU time per request:
//   once         each connection registered once, edge-triggered: per request a recv and a send;
//   rearm        as Asio's async_wait does: an EPOLL_CTL_MOD after each request as well;
//   speculative  as Asio's async_receive does: after each reply a recv that usually finds nothing.
// A benchmark, not a test: one JSON line per mode, nothing asserted (docs/BENCHMARKS.md).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_support.hpp"

namespace cohort::bench {
namespace {

constexpr size_t kMessageBytes = 32;

enum class Mode { Once, Rearm, Speculative };

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

void set_no_delay(int descriptor) {
  int on = 1;
  ::setsockopt(descriptor, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

// A client: request, wait for the whole reply, again, until `stop`.
void run_client(uint16_t port, const std::atomic<bool>& stop, std::atomic<uint64_t>& requests) {
  int descriptor = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  check(descriptor >= 0, "socket");
  set_no_delay(descriptor);
  sockaddr_in address = loopback(port);
  check(::connect(descriptor, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0,
        "connect");
  char message[kMessageBytes] = {};
  while (!stop.load(std::memory_order_relaxed)) {
    if (::send(descriptor, message, sizeof message, MSG_NOSIGNAL) != sizeof message) break;
    size_t got = 0;
    while (got < sizeof message) {
      ssize_t result = ::recv(descriptor, message + got, sizeof message - got, 0);
      if (result <= 0) {
        ::close(descriptor);
        return;
      }
      got += static_cast<size_t>(result);
    }
    requests.fetch_add(1, std::memory_order_relaxed);
  }
  ::close(descriptor);
}

double thread_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_THREAD, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

// Answers what `descriptor` holds; in speculative mode keeps reading until the socket is empty.
void serve(int descriptor, Mode mode, char* buffer, size_t size) {
  for (;;) {
    ssize_t got = ::recv(descriptor, buffer, size, MSG_DONTWAIT);
    if (got <= 0) return;
    ::send(descriptor, buffer, static_cast<size_t>(got), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (mode != Mode::Speculative) return;
  }
}

void serve_for(Mode mode, int clients, double seconds) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  check(listener >= 0, "socket");
  sockaddr_in address = loopback(0);
  check(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0, "bind");
  check(::listen(listener, 1024) == 0, "listen");
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  uint16_t port = ntohs(address.sin_port);

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> requests{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&] { run_client(port, stop, requests); });
  }
  int poller = ::epoll_create1(EPOLL_CLOEXEC);
  check(poller >= 0, "epoll_create1");
  std::vector<int> connections;
  for (int i = 0; i < clients; ++i) {
    int descriptor = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    check(descriptor >= 0, "accept4");
    set_no_delay(descriptor);
    epoll_event event{};
    event.events = EPOLLIN | EPOLLET;
    event.data.fd = descriptor;
    check(::epoll_ctl(poller, EPOLL_CTL_ADD, descriptor, &event) == 0, "epoll_ctl");
    connections.push_back(descriptor);
  }

  std::vector<char> buffer(64 * 1024);
  std::vector<epoll_event> events(256);
  uint64_t requests_before = requests.load();
  double cpu_before = thread_cpu_seconds();
  Clock::time_point start = Clock::now();
  while (seconds_since(start) < seconds) {
    int ready = ::epoll_wait(poller, events.data(), static_cast<int>(events.size()), 100);
    for (int i = 0; i < ready; ++i) {
      int descriptor = events[static_cast<size_t>(i)].data.fd;
      serve(descriptor, mode, buffer.data(), buffer.size());
      if (mode == Mode::Rearm) {
        epoll_event event{};
        event.events = EPOLLIN | EPOLLET;
        event.data.fd = descriptor;
        ::epoll_ctl(poller, EPOLL_CTL_MOD, descriptor, &event);
      }
    }
  }
  double cpu = thread_cpu_seconds() - cpu_before;
  double elapsed = seconds_since(start);
  uint64_t served = requests.load() - requests_before;
  stop = true;
  for (int descriptor : connections) ::shutdown(descriptor, SHUT_RDWR);
  for (std::thread& thread : threads) thread.join();
  for (int descriptor : connections) ::close(descriptor);
  ::close(poller);
  ::close(listener);

  const char* name = mode == Mode::Once ? "once" : mode == Mode::Rearm ? "rearm" : "speculative";
  std::printf(
      "{\"mode\":\"%s\",\"clients\":%d,\"requests_per_s\":%.0f,\"server_cpu_us_per_request\":"
      "%.3f}\n",
      name, clients, static_cast<double>(served) / elapsed,
      served > 0 ? cpu * 1e6 / static_cast<double>(served) : 0.0);
  std::fflush(stdout);
}

}  // namespace
}  // namespace cohort::bench

int main(int argc, char** argv) {
  using cohort::bench::Mode;
  CLI::App app{"epoll_rearm_bench: what re-arming an epoll connection per request costs a server"};
  int clients = 16;
  double seconds = 3;
  int repeats = 3;
  app.add_option("--clients", clients, "Client threads, one connection each")
      ->check(CLI::Range(1, 256));
  app.add_option("--seconds", seconds, "Seconds per mode and repeat")
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--repeats", repeats, "Rounds of the three modes, interleaved")
      ->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  try {
    for (int round = 0; round < repeats; ++round) {
      for (Mode mode : {Mode::Once, Mode::Rearm, Mode::Speculative}) {
        cohort::bench::serve_for(mode, clients, seconds);
      }
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "epoll_rearm_bench: %s\n", error.what());
    return 1;
  }
  return 0;
}
