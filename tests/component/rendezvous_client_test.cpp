// RendezvousClient on real sockets with a fake clock: a daemon that welcomed the client and then
// went silent is reported lost once the heartbeat timeout has passed on the clock, one that
// accepts but never answers at the connect deadline, and one that is not there is retried until
// the connect deadline on the clock, not the wall clock.
#include "rendezvous/client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <vector>

#include "proto/control_frame.hpp"
#include "proto/control_messages.hpp"
#include "tests/support/fake_clock.hpp"
#include "tests/support/io_steps.hpp"
#include "tests/support/wait_until.hpp"

using namespace cohort;
using namespace std::chrono_literals;
namespace ip = boost::asio::ip;

namespace {

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

struct ClientTest {
  boost::asio::io_context io;
  test::FakeClock clock;
  int losses = 0;
  ConnectionLoss last_loss = ConnectionLoss::Closed;
  std::string last_reason;
  std::vector<proto::ControlMessage> messages;  ///< what the client handed on

  std::unique_ptr<RendezvousClient> client(uint16_t port,
                                           std::chrono::milliseconds deadline = 1000ms) {
    ClientOptions options{"127.0.0.1", port, 1000ms, 5000ms, deadline};
    return std::make_unique<RendezvousClient>(
        io, clock, options,
        [this](proto::ControlMessage message) { messages.push_back(std::move(message)); },
        [this](ConnectionLoss kind, const std::string& reason) {
          ++losses;
          last_loss = kind;
          last_reason = reason;
        });
  }
  /// A client connected to `daemon` (which has accepted it), with this connect deadline.
  std::unique_ptr<RendezvousClient> connected_to(SilentDaemon& daemon,
                                                 std::chrono::milliseconds deadline = 1000ms) {
    auto made = client(daemon.port(), deadline);
    made->connect(proto::Hello{});
    REQUIRE(run_until([&] { return made->connected() && daemon.socket.is_open(); }));
    return made;
  }
  /// `daemon` challenges and welcomes the client (a run without a token: no proof to check),
  /// then says nothing more.
  void welcome(SilentDaemon& daemon, RendezvousClient& connected) {
    std::string frames =
        proto::encode_frame(proto::encode_message(proto::Challenge{std::string(64, 'a')})) +
        proto::encode_frame(proto::encode_message(proto::Welcome{}));
    boost::asio::write(daemon.socket, boost::asio::buffer(frames));
    REQUIRE(run_until([&] { return connected.welcomed(); }));
  }
  void settle() { test::settle(io); }
  bool run_until(const std::function<bool()>& condition) {
    return test::run_io_until(io, condition);
  }
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
  auto client = t.connected_to(daemon);
  t.welcome(daemon, *client);

  for (int second = 1; second <= 5; ++second) t.clock.advance(1s);  // 5 s silent: the limit
  t.settle();
  CHECK(t.losses == 0);
  CHECK(client->connected());
  t.clock.advance(1s);
  CHECK(t.losses == 1);
  CHECK(t.last_loss == ConnectionLoss::HeartbeatTimeout);
  t.clock.advance(10s);
  t.settle();
  CHECK(t.losses == 1);
}

TEST_CASE(
    "a welcomed daemon's silence is judged when it reaches the heartbeat timeout, not at "
    "the next heartbeat",
    "[rendezvous_client]") {
  ClientTest t;
  SilentDaemon daemon(t.io);
  auto client = t.connected_to(daemon);
  t.welcome(daemon, *client);
  t.clock.advance(500ms);  // heard from half a heartbeat interval later, then never again
  std::string heartbeat = proto::encode_frame(proto::encode_message(proto::Heartbeat{}));
  boost::asio::write(daemon.socket, boost::asio::buffer(heartbeat));
  REQUIRE(t.run_until([&] { return t.messages.size() == 2; }));  // the welcome, the heartbeat
  SteadyTime heard = t.clock.now();
  while (t.losses == 0 && t.clock.now() - heard < 8s) {
    t.clock.advance(100ms);
    t.settle();
  }
  CHECK(t.last_loss == ConnectionLoss::HeartbeatTimeout);
  CHECK(t.clock.now() - heard > 5s);
  CHECK(t.clock.now() - heard <= 5100ms);  // the heartbeat after it would be at 5.5 s
}

TEST_CASE("an absent daemon is retried until the connect deadline on the clock",
          "[rendezvous_client]") {
  ClientTest t;
  auto client = t.client(closed_port(t.io));
  SteadyTime started = t.clock.now();
  client->connect(proto::Hello{});
  REQUIRE(t.run_until([&] { return t.clock.armed() == 1; }));  // refused; a retry is due
  t.settle();                                                  // wall time alone changes nothing
  CHECK(t.losses == 0);

  for (int step = 0; step < 200 && t.losses == 0; ++step) {
    t.clock.advance(10ms);
    t.run_until([&] { return t.losses > 0 || t.clock.armed() == 1; });
  }
  CHECK(t.losses == 1);
  CHECK(t.last_loss == ConnectionLoss::CannotReach);
  CHECK(t.clock.now() - started >= 1000ms);  // the last try is at the deadline, not before
  CHECK(t.clock.now() - started < 1100ms);
  CHECK_FALSE(client->connected());
}

TEST_CASE("a refused attempt ends the attempts at once when a refusal is final",
          "[rendezvous_client]") {
  ClientTest t;
  ClientOptions options{"127.0.0.1", closed_port(t.io), 1000ms, 5000ms, 60000ms};
  options.refused_is_final = true;  // an agent-hosted daemon that welcomed the agent is gone
  RendezvousClient client(
      t.io, t.clock, options, [](proto::ControlMessage) {},
      [&](ConnectionLoss kind, const std::string& reason) {
        ++t.losses;
        t.last_loss = kind;
        t.last_reason = reason;
      });
  client.connect(proto::Hello{});
  REQUIRE(t.run_until([&] { return t.losses > 0; }));  // no clock advanced: no retry waited for
  CHECK(t.losses == 1);
  CHECK(t.last_loss == ConnectionLoss::CannotReach);
  CHECK(t.last_reason.find("refused") != std::string::npos);
  CHECK(t.clock.armed() == 0);
}

TEST_CASE("an agent that did not run past the heartbeat timeout knows it was dropped",
          "[rendezvous_client]") {
  ClientTest t;
  SilentDaemon daemon(t.io);
  auto client = t.connected_to(daemon);
  t.welcome(daemon, *client);
  t.clock.stall(6s);  // SIGSTOP: no timer ran, no heartbeat went out
  t.clock.advance(0s);
  CHECK(t.losses == 1);
  CHECK(t.last_loss == ConnectionLoss::Stalled);
}

TEST_CASE("a service that is no rendezvous is reported as such at once, not retried",
          "[rendezvous_client]") {
  ClientTest t;
  SilentDaemon sshd(t.io);
  auto client = t.client(sshd.port());
  client->connect(proto::Hello{});
  REQUIRE(t.run_until([&] { return sshd.socket.is_open(); }));
  boost::asio::write(sshd.socket, boost::asio::buffer(std::string("SSH-2.0-OpenSSH_9.2\r\n")));
  REQUIRE(t.run_until([&] { return t.losses == 1; }));
  CHECK(t.last_loss == ConnectionLoss::Untrusted);
  CHECK(t.last_reason.find("is not a cohort rendezvous: the first bytes it sent were not a cohort "
                           "frame (oversized frame)") != std::string::npos);
}

TEST_CASE("a silent service is tried again within the connect deadline, then cannot be reached",
          "[rendezvous_client]") {
  ClientTest t;
  SilentDaemon silent(t.io);
  SteadyTime started = t.clock.now();
  auto client = t.connected_to(silent, 8000ms);
  t.clock.advance(6s);  // past the heartbeat timeout, within the deadline: no loss, a new try
  t.settle();
  CHECK(t.losses == 0);
  CHECK_FALSE(client->connected());
  for (int step = 0; step < 100 && t.losses == 0; ++step) {  // the next tries, to the deadline
    t.clock.advance(100ms);
    t.run_until([&] { return t.losses > 0 || t.clock.armed() > 0; });
  }
  REQUIRE(t.losses == 1);
  CHECK(t.last_loss == ConnectionLoss::CannotReach);
  // The last try's connection (accepted by the kernel, never by the service, which ignored the
  // probe too) ends at the deadline, not a heartbeat timeout after it was made.
  CHECK(t.last_reason.find("never answered as a cohort rendezvous; --rdzv-endpoint must name "
                           "the control port") != std::string::npos);
  CHECK(t.clock.now() - started <= 8100ms);
}

TEST_CASE(
    "a connection accepted but never answered ends at a connect deadline shorter than the "
    "heartbeat timeout",
    "[rendezvous_client]") {
  // The agent's reconnection to a daemon of its run that went silent (a frozen machine's kernel
  // still accepts): one heartbeat interval, not the 5 s of silence a welcomed connection gets.
  ClientTest t;
  SilentDaemon frozen(t.io);
  SteadyTime started = t.clock.now();
  auto client = t.connected_to(frozen, 1000ms);
  t.clock.advance(900ms);
  t.settle();
  CHECK(t.losses == 0);
  t.clock.advance(100ms);
  REQUIRE(t.run_until([&] { return t.losses > 0; }));
  CHECK(t.last_loss == ConnectionLoss::CannotReach);
  CHECK(t.last_reason.find("it accepted the connection but sent nothing for 1.0s") !=
        std::string::npos);
  CHECK(t.clock.now() - started == 1000ms);
  CHECK(t.clock.armed() == 0);
}

TEST_CASE("a peer is sent the probe once, at connect: one that answers HTTP ends it at once",
          "[rendezvous_client]") {
  ClientTest t;
  SilentDaemon http(t.io);
  auto client = t.connected_to(http, 600000ms);
  t.settle();  // no heartbeat has come: the probe goes first, before any challenge
  std::string probe(proto::kSilentPeerProbe.size(), '\0');
  boost::asio::read(http.socket, boost::asio::buffer(probe));
  CHECK(probe == proto::kSilentPeerProbe);
  boost::asio::write(http.socket,
                     boost::asio::buffer(std::string("HTTP/1.0 404 Not Found\r\n\r\n")));
  REQUIRE(t.run_until([&] { return t.losses == 1; }));
  CHECK(t.last_loss == ConnectionLoss::Untrusted);
  CHECK(t.last_reason.find("it answers HTTP: is it a daemon's --http-port?") != std::string::npos);
}

TEST_CASE("a daemon slow to send its challenge hears the probe, then the hello: no heartbeat first",
          "[rendezvous_client]") {
  // A daemon whose loop was held up (a big page built) challenged a reconnecting agent seconds
  // late; heartbeats sent meanwhile came before the hello, and the daemon ended the connection
  // ("the first message must be hello"), and with it the agent.
  ClientTest t;
  SilentDaemon slow(t.io);
  auto client = t.connected_to(slow, 600000ms);
  for (int second = 1; second <= 3; ++second) {  // three heartbeat intervals, no challenge
    t.clock.advance(1s);
    t.settle();
  }
  std::string challenge =
      proto::encode_frame(proto::encode_message(proto::Challenge{std::string(64, 'a')}));
  boost::asio::write(slow.socket, boost::asio::buffer(challenge));
  std::string payload;
  proto::FrameDecoder decoder;
  std::string sent;
  REQUIRE(t.run_until([&] {
    char chunk[4096];
    boost::system::error_code error;
    slow.socket.non_blocking(true);
    size_t got = slow.socket.read_some(boost::asio::buffer(chunk), error);
    if (!error) sent.append(chunk, got);
    return sent.size() > proto::kSilentPeerProbe.size() + 4;
  }));
  REQUIRE(sent.rfind(proto::kSilentPeerProbe, 0) == 0);  // once, first
  decoder.feed(sent.data() + proto::kSilentPeerProbe.size(),
               sent.size() - proto::kSilentPeerProbe.size());
  REQUIRE(t.run_until([&] {
    char chunk[4096];
    boost::system::error_code error;
    size_t got = slow.socket.read_some(boost::asio::buffer(chunk), error);
    if (!error) decoder.feed(chunk, got);
    return decoder.next(payload) == proto::FrameDecoder::Status::Frame;
  }));
  std::string error;
  auto first = proto::decode_message(payload, error);
  REQUIRE(first);
  CHECK(std::string(proto::message_type(*first)) == "hello");
  CHECK(t.losses == 0);
}

TEST_CASE("an error before the welcome cannot make the agent rejoin", "[rendezvous_client]") {
  ClientTest t;
  SilentDaemon rogue(t.io);
  auto client = t.connected_to(rogue);
  // A daemon that proves nothing (here: sends no welcome) asks the node to rejoin, which would
  // stop its workers and start over: only a welcomed daemon may.
  std::string frames =
      proto::encode_frame(proto::encode_message(proto::Challenge{std::string(64, 'a')})) +
      proto::encode_frame(proto::encode_message(proto::Error{"dropped: rejoin", true}));
  boost::asio::write(rogue.socket, boost::asio::buffer(frames));
  REQUIRE(t.run_until([&] { return !t.messages.empty(); }));
  auto* error = std::get_if<proto::Error>(&t.messages.back());
  REQUIRE(error != nullptr);
  CHECK(error->message == "dropped: rejoin");
  CHECK_FALSE(error->rejoin);
}

namespace {

// A listener whose accept queue is full: the kernel drops every further SYN, as a host that is
// gone answers none, and a connect waits for the kernel's retries (minutes) unless ended.
struct FullListener {
  ip::tcp::acceptor acceptor;
  std::vector<ip::tcp::socket> fillers;

  explicit FullListener(boost::asio::io_context& io)
      : acceptor(io, ip::tcp::endpoint(ip::address_v4::loopback(), 0)) {
    acceptor.listen(0);  // room for one connection in the queue; nothing accepts it
    fillers.reserve(2);
    for (int i = 0; i < 2; ++i) {  // the second one's SYN is dropped already: it stays pending
      fillers.emplace_back(io);
      fillers.back().async_connect(acceptor.local_endpoint(),
                                   [](const boost::system::error_code&) {});
    }
  }
  uint16_t port() const { return acceptor.local_endpoint().port(); }
};

}  // namespace

TEST_CASE("a connection attempt that gets no answer ends at the connect deadline",
          "[rendezvous_client]") {
  ClientTest t;
  FullListener full(t.io);
  auto client = t.client(full.port(), 2000ms);
  SteadyTime started = t.clock.now();
  client->connect(proto::Hello{});
  t.settle();  // the SYN goes unanswered: nothing happens on its own
  CHECK(t.losses == 0);
  for (int step = 0; step < 40 && t.losses == 0; ++step) {
    t.clock.advance(100ms);
    t.run_until([&] { return t.losses > 0 || t.clock.armed() > 0; });  // the attempt's deadline
  }
  REQUIRE(t.losses == 1);
  CHECK(t.last_loss == ConnectionLoss::CannotReach);
  CHECK(t.last_reason.find("no answer to the connection attempt") != std::string::npos);
  CHECK(t.clock.now() - started >= 2000ms);
  CHECK(t.clock.now() - started <= 2300ms);  // the deadline and the last try's grace, no more
}
