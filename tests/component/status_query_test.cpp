// `cohort status` against a peer that drips its answer one byte at a time: the whole query ends
// at its timeout, however often a byte arrives within each read's timeout.
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "common/exit_codes.hpp"
#include "launcher/cli/status_command.hpp"

using namespace cohort;
using namespace std::chrono_literals;
namespace ip = boost::asio::ip;

TEST_CASE("a status answer dripped byte by byte ends at the query's timeout",
          "[component][status]") {
  boost::asio::io_context io;
  ip::tcp::acceptor acceptor(io, ip::tcp::endpoint(ip::make_address("127.0.0.1"), 0));
  uint16_t port = acceptor.local_endpoint().port();
  std::atomic<bool> done{false};
  std::thread dripper([&] {
    ip::tcp::socket peer = acceptor.accept();
    boost::system::error_code error;
    // A frame announcing 1 MiB, sent a byte every 50 ms: no read ever waits its full timeout.
    std::string frame = std::string("\x00\x10\x00\x00", 4) + std::string(1 << 20, ' ');
    for (size_t i = 0; i < frame.size() && !done && !error; ++i) {
      boost::asio::write(peer, boost::asio::buffer(&frame[i], 1), error);
      std::this_thread::sleep_for(50ms);
    }
  });
  StatusQuery query;
  query.endpoint = "127.0.0.1:" + std::to_string(port);
  query.timeout_ms = 500;
  auto start = std::chrono::steady_clock::now();
  int code = run_status_command(query);
  auto took = std::chrono::steady_clock::now() - start;
  done = true;
  dripper.join();
  CHECK(code == kExitRendezvous);
  CHECK(took < 5s);  // bounded by the timeout, not by the 14 hours the drip would take
}
