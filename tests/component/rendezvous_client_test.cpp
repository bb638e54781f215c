// RendezvousClient on real sockets with a fake clock: a daemon that accepts but never answers is
// reported lost once the heartbeat timeout has passed on the clock, and one that is not there is
// retried until the connect deadline on the clock, not the wall clock.
#include "rendezvous/client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <functional>

#include "tests/support/fake_clock.hpp"
#include "tests/support/io_steps.hpp"
#include "tests/support/wait_until.hpp"

using namespace cohort;
using namespace std::chrono_literals;
namespace ip = boost::asio::ip;

namespace {

struct ClientTest {
  boost::asio::io_context io;
  test::FakeClock clock;
  int losses = 0;
  ConnectionLoss last_loss = ConnectionLoss::Closed;

  std::unique_ptr<RendezvousClient> client(uint16_t port) {
    ClientOptions options{"127.0.0.1", port, 1000ms, 5000ms, 1000ms};
    return std::make_unique<RendezvousClient>(
        io, clock, options, [](proto::ControlMessage) {},
        [this](ConnectionLoss kind, const std::string&) {
          ++losses;
          last_loss = kind;
        });
  }
  void settle() { test::settle(io); }
  bool run_until(const std::function<bool()>& condition) {
    return test::run_io_until(io, condition);
  }
};

// A listener on loopback that accepts one connection and never says a word.
struct SilentDaemon {
  ip::tcp::acceptor acceptor;
  ip::tcp::socket socket;

  explicit SilentDaemon(boost::asio::io_context& io)
      : acceptor(io, ip::tcp::endpoint(ip::address_v4::loopback(), 0)), socket(io) {
    acceptor.async_accept(socket, [](const boost::system::error_code&) {});
  }
  uint16_t port() const { return acceptor.local_endpoint().port(); }
};

uint16_t closed_port(boost::asio::io_context& io) {
  ip::tcp::acceptor acceptor(io, ip::tcp::endpoint(ip::address_v4::loopback(), 0));
  return acceptor.local_endpoint().port();
}

}  // namespace

TEST_CASE("a silent daemon is lost once the heartbeat timeout has passed on the clock",
          "[rendezvous_client]") {
  ClientTest t;
  SilentDaemon daemon(t.io);
  auto client = t.client(daemon.port());
  client->connect(proto::Hello{});
  REQUIRE(t.run_until([&] { return client->connected() && daemon.socket.is_open(); }));

  for (int second = 1; second <= 5; ++second) t.clock.advance(1s);  // 5 s silent: the limit
  t.settle();
  CHECK(t.losses == 0);
  CHECK(client->connected());
  t.clock.advance(1s);
  CHECK(t.losses == 1);
  t.clock.advance(10s);
  t.settle();
  CHECK(t.losses == 1);
}

TEST_CASE("an absent daemon is retried until the connect deadline on the clock",
          "[rendezvous_client]") {
  ClientTest t;
  auto client = t.client(closed_port(t.io));
  client->connect(proto::Hello{});
  REQUIRE(t.run_until([&] { return t.clock.armed() == 1; }));  // refused; a retry is due
  t.settle();                                                  // wall time alone changes nothing
  CHECK(t.losses == 0);

  SteadyTime started = t.clock.now();
  for (int step = 0; step < 100 && t.losses == 0; ++step) {
    t.clock.advance(10ms);
    t.run_until([&] { return t.losses > 0 || t.clock.armed() == 1; });
  }
  CHECK(t.losses == 1);
  CHECK(t.clock.now() - started < 1000ms);  // gave up when the next retry would pass it
  CHECK_FALSE(client->connected());
}

TEST_CASE("an agent that did not run past the heartbeat timeout knows it was dropped",
          "[rendezvous_client]") {
  ClientTest t;
  SilentDaemon daemon(t.io);
  auto client = t.client(daemon.port());
  client->connect(proto::Hello{});
  REQUIRE(t.run_until([&] { return client->connected() && daemon.socket.is_open(); }));
  t.clock.stall(6s);  // SIGSTOP: no timer ran, no heartbeat went out
  t.clock.advance(0s);
  CHECK(t.losses == 1);
  CHECK(t.last_loss == ConnectionLoss::Stalled);
}
