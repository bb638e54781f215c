// `cohort status` and `cohort stop` against peers that are no daemon: one that drips its answer
// one byte at a time (the whole query ends at its timeout, however often a byte arrives within
// each read's timeout), ones that accept and say nothing or never accept (the same timeout), and
// ones that announce frames larger than the tool will hold.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "common/exit_codes.hpp"
#include "launcher/cli/status_command.hpp"
#include "launcher/cli/stop_command.hpp"
#include "proto/control_frame.hpp"
#include "proto/control_messages.hpp"

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
    // A frame announcing 60 KiB, sent a byte every 50 ms: no read ever waits its full timeout.
    std::string frame = std::string("\x00\x00\xf0\x00", 4) + std::string(60 << 10, ' ');
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

namespace {

// A peer that sends `bytes` to the first connection and keeps it open until told to stop.
struct Announcer {
  boost::asio::io_context io;
  ip::tcp::acceptor acceptor{io, ip::tcp::endpoint(ip::make_address("127.0.0.1"), 0)};
  std::atomic<bool> done{false};
  std::thread thread;

  explicit Announcer(std::string bytes) {
    thread = std::thread([this, bytes] {
      ip::tcp::socket peer = acceptor.accept();
      boost::system::error_code error;
      boost::asio::write(peer, boost::asio::buffer(bytes), error);
      while (!done) std::this_thread::sleep_for(10ms);
    });
  }
  ~Announcer() {
    done = true;
    thread.join();
  }
  std::string endpoint() const {
    return "127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  }
};

}  // namespace

TEST_CASE("a challenge over 64 KiB, or a stop's answer over 1 MiB, is refused before it is read",
          "[component][status]") {
  // Each announces 32 MiB and sends the first 65 KiB: the tool used to wait for the rest (a
  // status reply may take 64 MiB), and to hold gigabytes once such a frame was parsed.
  std::string announced = std::string("\x02\x00\x00\x00", 4) + std::string(65 << 10, '[');
  SECTION("status: the first frame") {
    Announcer peer(announced);
    StatusQuery query;
    query.endpoint = peer.endpoint();
    auto start = std::chrono::steady_clock::now();
    CHECK(run_status_command(query) == kExitRendezvous);
    CHECK(std::chrono::steady_clock::now() - start < 3s);  // its timeout is 5 s
  }
  SECTION("stop: the answer") {
    std::string challenge =
        proto::encode_frame(proto::encode_message(proto::Challenge{std::string(64, 'c')}));
    Announcer peer(challenge + announced);
    StopQuery query;
    query.endpoint = peer.endpoint();
    query.run_id = "job";
    auto start = std::chrono::steady_clock::now();
    CHECK(run_stop_command(query) == kExitRendezvous);
    CHECK(std::chrono::steady_clock::now() - start < 3s);
  }
}

// A listener whose accept queue is full (listen backlog 0, one connection already waiting, never
// accepted): the kernel drops further handshakes, so a connect to it waits until given up.
struct FullListener {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int waiting = ::socket(AF_INET, SOCK_STREAM, 0);
  uint16_t port = 0;

  FullListener() {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0);
    REQUIRE(::listen(fd, 0) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port = ntohs(address.sin_port);
    REQUIRE(::connect(waiting, reinterpret_cast<sockaddr*>(&address), length) == 0);
  }
  ~FullListener() {
    ::close(waiting);
    ::close(fd);
  }
};

// Each read used to wait with SO_RCVTIMEO, which Asio's blocking read answers by polling again
// without a timeout: a peer that accepted and said nothing held `cohort status`, `stop` and
// `doctor` for as long as it kept the connection open.
TEST_CASE("a peer that stays silent or never accepts ends the query at its timeout",
          "[component][status]") {
  auto start = std::chrono::steady_clock::now();
  SECTION("status: accepted, never a challenge") {
    Announcer peer("");
    StatusFetch fetched = fetch_status({peer.endpoint(), "", "", false, 500});
    CHECK_FALSE(fetched.reply);
    CHECK(fetched.exit_code == kExitRendezvous);
    CHECK(fetched.problem.find("no challenge") != std::string::npos);
    CHECK(fetched.problem.find("within the timeout") != std::string::npos);
  }
  SECTION("stop: a challenge, never an answer") {
    Announcer peer(
        proto::encode_frame(proto::encode_message(proto::Challenge{std::string(64, 'c')})));
    StopQuery query;
    query.endpoint = peer.endpoint();
    query.run_id = "job";
    query.timeout_ms = 500;
    CHECK(run_stop_command(query) == kExitRendezvous);
  }
  SECTION("status: the connection never made") {
    FullListener listener;
    StatusFetch fetched =
        fetch_status({"127.0.0.1:" + std::to_string(listener.port), "", "", false, 500});
    CHECK_FALSE(fetched.reply);
    CHECK(fetched.exit_code == kExitRendezvous);
    CHECK(fetched.problem.find("cannot reach") != std::string::npos);
  }
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= 450ms);
  CHECK(took < 4s);
}

TEST_CASE(
    "a peer is asked as HTTP would ask, at connect: an HTTP server, or other bytes, are named",
    "[component][status]") {
  SECTION("it answers the probe as HTTP") {
    boost::asio::io_context io;
    ip::tcp::acceptor acceptor(io, ip::tcp::endpoint(ip::make_address("127.0.0.1"), 0));
    std::string asked;
    std::thread server([&] {
      ip::tcp::socket peer = acceptor.accept();
      boost::system::error_code error;
      char buffer[256];
      while (asked.find("\r\n\r\n") == std::string::npos && !error)
        asked.append(buffer, peer.read_some(boost::asio::buffer(buffer), error));
      boost::asio::write(peer, boost::asio::buffer(std::string("HTTP/1.1 200 OK\r\n\r\nhi")),
                         error);
    });
    auto start = std::chrono::steady_clock::now();
    StatusFetch fetched = fetch_status(
        {"127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()), "", "", false, 5000});
    auto took = std::chrono::steady_clock::now() - start;
    server.join();
    CHECK(asked == proto::kSilentPeerProbe);
    CHECK_FALSE(fetched.reply);
    CHECK(fetched.exit_code == kExitRendezvous);
    CHECK(fetched.problem.find("it answers HTTP: is it a daemon's --http-port?") !=
          std::string::npos);
    CHECK(took < 3s);  // the probe went at connect: no second's wait for a challenge
  }
  SECTION("it speaks first, and not in frames") {
    Announcer peer("SSH-2.0-OpenSSH_9.2p1\r\n");
    StatusFetch fetched = fetch_status({peer.endpoint(), "", "", false, 5000});
    CHECK_FALSE(fetched.reply);
    CHECK(fetched.problem.find("it is not a cohortd: its first bytes are no cohort frame "
                               "('SSH-2.0-OpenSSH_9.2p1\\r\\n')") != std::string::npos);
  }
  SECTION("it closes without a word") {
    boost::asio::io_context io;
    ip::tcp::acceptor acceptor(io, ip::tcp::endpoint(ip::make_address("127.0.0.1"), 0));
    std::thread server([&] { acceptor.accept().close(); });
    StatusFetch fetched = fetch_status(
        {"127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()), "", "", false, 5000});
    server.join();
    CHECK(fetched.problem.find("it closed the connection without a word (--rdzv-endpoint names "
                               "cohortd's control port") != std::string::npos);
  }
}

// An endpoint posing as the daemon, without its token: it can send a challenge and a well-formed
// answer, but cannot prove the answer. A tool with the token refuses it; without a token there
// is nothing to prove (as before).
TEST_CASE("with a token, an answer that does not prove it is refused", "[component][status]") {
  std::string challenge =
      proto::encode_frame(proto::encode_message(proto::Challenge{std::string(64, 'c')}));
  const std::string token = "the daemon's token, 32 bytes...";
  auto made_up_status = [&](const std::string& proof) {
    proto::StatusReply reply;
    reply.port = 29400;
    reply.runs.push_back(proto::StatusRun{});
    reply.runs[0].run_id = "job";
    reply.runs[0].phase = "running";
    reply.proof = proof;
    return challenge + proto::encode_frame(proto::encode_message(reply));
  };
  SECTION("status, no proof") {
    Announcer peer(made_up_status(""));
    StatusFetch fetched = fetch_status({peer.endpoint(), "", token});
    CHECK_FALSE(fetched.reply);
    CHECK(fetched.exit_code == kExitRendezvous);
    CHECK(fetched.problem.find("the answer proves no token: the endpoint is a cohortd without "
                               "one") != std::string::npos);
  }
  SECTION("status, a proof made with another token") {
    Announcer peer(made_up_status(std::string(64, 'a')));
    StatusFetch fetched = fetch_status({peer.endpoint(), "", token});
    CHECK_FALSE(fetched.reply);
    CHECK(fetched.problem.find("does not prove that the endpoint holds the token") !=
          std::string::npos);
  }
  SECTION("status without a token: shown, as before") {
    Announcer peer(made_up_status(""));
    StatusFetch fetched = fetch_status({peer.endpoint()});
    REQUIRE(fetched.reply);
    CHECK(fetched.reply->runs.at(0).run_id == "job");
  }
  SECTION("stop: a claimed stop") {
    Announcer peer(challenge +
                   proto::encode_frame(proto::encode_message(proto::StopRunReply{"job", true, 4})));
    StopQuery query;
    query.endpoint = peer.endpoint();
    query.run_id = "job";
    query.token = token;
    CHECK(run_stop_command(query) == kExitRendezvous);
  }
  SECTION("events") {
    Announcer peer(challenge + proto::encode_frame(
                                   proto::encode_message(proto::EventsReply{"job", {"{}"}, 0})));
    StatusQuery query;
    query.endpoint = peer.endpoint();
    query.events_run = "job";
    query.token = token;
    CHECK(run_events_command(query) == kExitRendezvous);
  }
}
