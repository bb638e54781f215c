// rendezvous::ControlSession on a real loopback connection: close_after() sends what is left and
// then closes, and a peer that neither reads nor closes is reset at the close grace instead of
// holding the connection (and its unsent bytes) for ever.
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "rendezvous/control_session.hpp"

using namespace cohort;
using namespace std::chrono_literals;
namespace ip = boost::asio::ip;

TEST_CASE("a session closing after its last words resets a peer that never reads them",
          "[component][daemon]") {
  // A member dropped (at its run's join timeout) while it flooded the daemon and read nothing:
  // the session stopped reading to close, its write never ended, and it stayed open for ever.
  boost::asio::io_context io;
  ip::tcp::acceptor acceptor(io, ip::tcp::endpoint(ip::make_address("127.0.0.1"), 0));
  ip::tcp::socket peer(io);
  peer.connect(acceptor.local_endpoint());
  int small = 4096;
  ::setsockopt(peer.native_handle(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ip::tcp::socket accepted = acceptor.accept();
  ::setsockopt(accepted.native_handle(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  std::optional<std::string> closed;
  auto session = std::make_shared<ControlSession>(
      std::move(accepted), [](ControlSession&, proto::ControlMessage) {},
      [&](ControlSession&, const std::string& reason) { closed = reason; });
  session->set_close_grace(300ms);
  session->start();
  session->send_bytes(std::string(2 << 20, 'x'));  // far more than the kernel's buffers hold
  session->close_after(proto::Error{"dropped"}, "node lost");
  auto start = std::chrono::steady_clock::now();
  io.run_for(5s);
  auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(closed);
  CHECK(*closed == "node lost (the peer did not read its last messages)");
  CHECK(took >= 250ms);
  CHECK(took < 3s);
  CHECK_FALSE(session->open());
}
