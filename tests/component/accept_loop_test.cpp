// AcceptLoop on 127.0.0.1 with real sockets: every connection is handed over with its peer's
// address, a bad address or a taken port is an error from open(), and once closed the port
// refuses connections and nothing more is handed over.
#include <catch2/catch.hpp>
#include <chrono>
#include <vector>

#include "common/accept_loop.hpp"
#include "common/asio_clock.hpp"

using namespace cohort;
using namespace std::chrono_literals;
using boost::asio::ip::tcp;

namespace {

// Connects to 127.0.0.1:`port` from `source`; the error, if any.
boost::system::error_code connect_from(boost::asio::io_context& io, tcp::socket& socket,
                                       const std::string& source, uint16_t port) {
  boost::system::error_code error;
  socket = tcp::socket(io);
  socket.open(tcp::v4(), error);
  if (!error) socket.bind({boost::asio::ip::make_address(source), 0}, error);
  if (!error) socket.connect({boost::asio::ip::make_address("127.0.0.1"), port}, error);
  return error;
}

}  // namespace

TEST_CASE("an accept loop hands over every connection until it is closed", "[component][accept]") {
  boost::asio::io_context io;
  AsioClock clock(io);
  std::vector<std::string> peers;
  AcceptLoop loop(io, clock, "test",
                  [&peers](tcp::socket, const std::string& peer) { peers.push_back(peer); });
  REQUIRE_FALSE(loop.open("127.0.0.1", 0, 16));
  REQUIRE(loop.port() != 0);
  loop.start();

  boost::asio::io_context client_io;
  std::vector<tcp::socket> clients;
  for (const char* source : {"127.0.4.1", "127.0.4.2", "127.0.4.3"}) {
    clients.emplace_back(client_io);
    REQUIRE_FALSE(connect_from(client_io, clients.back(), source, loop.port()));
  }
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (peers.size() < 3 && std::chrono::steady_clock::now() < deadline) io.run_for(10ms);
  CHECK(peers == std::vector<std::string>{"127.0.4.1", "127.0.4.2", "127.0.4.3"});

  uint16_t port = loop.port();
  loop.close();
  io.run_for(50ms);
  tcp::socket late(client_io);
  CHECK(connect_from(client_io, late, "127.0.4.4", port) == boost::asio::error::connection_refused);
  io.run_for(50ms);
  CHECK(peers.size() == 3);
}

TEST_CASE("an accept loop's open names a bad address and a taken port", "[component][accept]") {
  boost::asio::io_context io;
  AsioClock clock(io);
  AcceptLoop first(io, clock, "test", [](tcp::socket, const std::string&) {});
  CHECK(first.open("not an address", 0, 16));
  REQUIRE_FALSE(first.open("127.0.0.1", 0, 16));
  AcceptLoop second(io, clock, "test", [](tcp::socket, const std::string&) {});
  CHECK(second.open("127.0.0.1", first.port(), 16) == boost::asio::error::address_in_use);
}
