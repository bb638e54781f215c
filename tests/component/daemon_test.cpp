// The rendezvous daemon on 127.0.0.1:0 with clients speaking the control protocol over real
// sockets: rounds, a fresh worker store per round, node loss, malformed frames, status.
#include <poll.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <future>
#include <thread>
#include <utility>

#include "common/asio_clock.hpp"
#include "common/exit_codes.hpp"
#include "common/fd_wait.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "launcher/cli/status_command.hpp"
#include "launcher/cli/status_watch.hpp"
#include "proto/auth.hpp"
#include "proto/control_frame.hpp"
#include "proto/control_messages.hpp"
#include "rendezvous/daemon.hpp"
#include "tests/support/wait_until.hpp"
#include "tests/support/wire_bytes.hpp"

using namespace cohort;
namespace ip = boost::asio::ip;

namespace {

// The daemon on its own thread, stopped and joined at the end of the test.
struct DaemonThread {
  boost::asio::io_context io;
  AsioClock clock{io};
  RendezvousDaemon daemon;
  std::thread thread;

  explicit DaemonThread(std::string token = {})
      : DaemonThread(DaemonOptions{"127.0.0.1", 0, 0, 0, std::move(token)}) {}
  explicit DaemonThread(DaemonOptions options) : daemon(io, clock, std::move(options)) {
    REQUIRE_FALSE(daemon.start());
    thread = std::thread([this] { io.run(); });
  }
  ~DaemonThread() {
    boost::asio::post(io, [this] {
      daemon.stop();
      io.stop();
    });
    thread.join();
  }
};

// A blocking control-protocol client with a receive timeout; it reads the daemon's challenge
// on connecting (after sending the probe first, as agents do, with `probe_first`), and proves
// `token` (if any) in its hello.
struct Client {
  boost::asio::io_context io;
  ip::tcp::socket socket{io};
  proto::FrameDecoder decoder;
  std::string challenge;
  std::string token;

  explicit Client(uint16_t port, std::string with_token = {}, bool probe_first = false)
      : token(std::move(with_token)) {
    socket.connect(ip::tcp::endpoint(ip::make_address("127.0.0.1"), port));
    timeval timeout{5, 0};
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (probe_first) send_raw(std::string(proto::kSilentPeerProbe));
    challenge = expect<proto::Challenge>().nonce;
  }
  void send(const proto::ControlMessage& message) {
    send_raw(proto::encode_frame(proto::encode_message(message)));
  }
  void send_raw(const std::string& bytes) {
    boost::asio::write(socket, boost::asio::buffer(bytes));
  }
  /// The next message, or nullopt at end of file / timeout.
  std::optional<proto::ControlMessage> receive() {
    std::string payload;
    char buffer[4096];
    while (decoder.next(payload) != proto::FrameDecoder::Status::Frame) {
      boost::system::error_code error;
      size_t got = socket.read_some(boost::asio::buffer(buffer), error);
      if (error) return std::nullopt;
      decoder.feed(buffer, got);
    }
    std::string problem;
    return proto::decode_message(payload, problem);
  }
  /// True when the daemon closes the connection before the receive timeout (5 s).
  bool closed_by_daemon() {
    char buffer[4096];
    boost::system::error_code error;
    while (!error) socket.read_some(boost::asio::buffer(buffer), error);
    return error == boost::asio::error::eof || error == boost::asio::error::connection_reset;
  }
  template <typename T>
  T expect() {
    for (;;) {
      auto message = receive();
      REQUIRE(message);
      if (std::holds_alternative<proto::Waiting>(*message) && !std::is_same_v<T, proto::Waiting>) {
        continue;
      }
      INFO("got " << proto::message_type(*message));
      REQUIRE(std::holds_alternative<T>(*message));
      return std::get<T>(*message);
    }
  }
  void hello(const std::string& run, const std::string& node, int nodes, int max_restarts = 0) {
    proto::Hello hello;
    hello.run_id = run;
    hello.node_id = node;
    hello.address = "addr-" + node;
    hello.local_world_size = 2;
    hello.config = {nodes, nodes, max_restarts, 100, 5000, 5000};
    hello.client_nonce = "client-nonce-" + node;
    if (!token.empty()) {
      hello.proof = proto::hello_proof(token, challenge, hello.client_nonce, run, node);
    }
    send(hello);
    auto welcome = expect<proto::Welcome>();
    if (!token.empty()) {
      CHECK(welcome.proof == proto::welcome_proof(token, challenge, hello.client_nonce));
    }
  }
  /// A hello for `run`/`node` proven with `key` (if any) that the daemon must refuse: its reason.
  std::string refused_hello(const std::string& run, const std::string& node,
                            const std::string& key) {
    proto::Hello hello;
    hello.run_id = run;
    hello.node_id = node;
    hello.address = "addr-" + node;
    if (!key.empty()) hello.proof = proto::hello_proof(key, challenge, "", run, node);
    send(hello);
    return expect<proto::Error>().message;
  }
  /// A status request proven with `key` (if any); the reply or the refusal.
  proto::ControlMessage status(const std::string& run_id = {}, const std::string& key = {},
                               const std::string& nonce = {}) {
    proto::StatusRequest request{run_id, "", nonce};
    if (!key.empty()) request.proof = proto::status_proof(key, challenge, run_id);
    send(request);
    auto reply = receive();
    REQUIRE(reply);
    return *reply;
  }
};

// A raw connection from `from` (a loopback address) that has not said hello.
struct Stranger {
  boost::asio::io_context io;
  ip::tcp::socket socket;

  Stranger(uint16_t port, const char* from)
      : socket(io, ip::tcp::endpoint(ip::make_address(from), 0)) {
    socket.connect(ip::tcp::endpoint(ip::make_address("127.0.0.1"), port));
    timeval timeout{5, 0};
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  /// True when the daemon sends its challenge; false when it closes the connection first.
  bool challenged() {
    char byte;
    boost::system::error_code error;
    socket.read_some(boost::asio::buffer(&byte, 1), error);
    return !error;
  }
  /// True when the daemon closes the connection before the receive timeout (5 s).
  bool closed_by_daemon() {
    char buffer[4096];
    boost::system::error_code error;
    while (!error) socket.read_some(boost::asio::buffer(buffer), error);
    return error == boost::asio::error::eof || error == boost::asio::error::connection_reset;
  }
};

bool store_answers(const std::string& host, int port, const char* from = "127.0.0.1") {
  boost::asio::io_context io;
  ip::tcp::socket socket(io, ip::tcp::endpoint(ip::make_address(from), 0));
  boost::system::error_code error;
  socket.connect(ip::tcp::endpoint(ip::make_address(host), static_cast<uint16_t>(port)), error);
  if (error) return false;
  // A 1.13 GETNUMKEYS (opcode 6) is answered with an int64.
  boost::asio::write(socket, boost::asio::buffer("\x06", 1), error);
  char reply[8];
  boost::asio::read(socket, boost::asio::buffer(reply), error);
  return !error;
}

// Sends a 1.13 SET of `size` bytes at `key` to the store on 127.0.0.1:`port`; true when the store
// took it (its GETNUMKEYS after it is answered), false when it closed the connection.
bool store_takes(int port, const std::string& key, size_t size) {
  boost::asio::io_context io;
  ip::tcp::socket socket(io);
  boost::system::error_code error;
  socket.connect(ip::tcp::endpoint(ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)),
                 error);
  if (error) return false;
  std::string set = test::u8(0) + test::bytes(key) + test::bytes(std::string(size, 'v'));
  boost::asio::write(socket, boost::asio::buffer(set + test::u8(6)), error);
  char reply[8];
  boost::asio::read(socket, boost::asio::buffer(reply), error);
  return !error;
}

}  // namespace

TEST_CASE("two nodes form a round with contiguous ranks and a live store", "[component][daemon]") {
  DaemonThread d;
  Client a(d.daemon.port()), b(d.daemon.port());
  a.hello("job", "a", 2);
  b.hello("job", "b", 2);
  auto ra = a.expect<proto::RoundAssigned>();
  auto rb = b.expect<proto::RoundAssigned>();
  CHECK(ra.round == 0);
  CHECK(ra.group_rank == 0);
  CHECK(rb.group_rank == 1);
  CHECK(rb.base_rank == 2);
  CHECK(ra.world_size == 4);
  CHECK(ra.master_addr == "127.0.0.1");
  CHECK(ra.master_port == rb.master_port);
  CHECK(store_answers(ra.master_addr, ra.master_port));
}

TEST_CASE("a closed connection is a lost node: the survivor restarts and regroups at once",
          "[component][daemon]") {
  DaemonThread d;
  Client c(d.daemon.port());
  auto e = std::make_unique<Client>(d.daemon.port());
  proto::Hello elastic;  // a 1:2 run, so that the survivor may go on alone
  elastic.run_id = "elastic";
  elastic.config = {1, 2, 0, 100, 5000, 5000};
  for (auto [client, id] : {std::pair{&c, "c"}, std::pair{e.get(), "e"}}) {
    elastic.node_id = id;
    elastic.address = std::string("addr-") + id;
    client->send(elastic);
    client->expect<proto::Welcome>();
  }
  auto round0 = c.expect<proto::RoundAssigned>();
  CHECK(round0.group_world_size == 2);
  int old_port = round0.master_port;
  e.reset();  // node e's agent dies
  c.expect<proto::Restart>();
  c.send(proto::Join{});
  auto round1 = c.expect<proto::RoundAssigned>();
  CHECK(round1.round == 1);
  CHECK(round1.group_world_size == 1);
  CHECK(round1.master_port != old_port);  // a fresh store: the old one is closed
  CHECK_FALSE(store_answers("127.0.0.1", old_port));
}

TEST_CASE("a worker failure with no budget stops every node with the summary",
          "[component][daemon]") {
  DaemonThread d;
  Client a(d.daemon.port()), b(d.daemon.port());
  a.hello("job", "a", 2);
  b.hello("job", "b", 2);
  a.expect<proto::RoundAssigned>();
  b.expect<proto::RoundAssigned>();
  b.send(proto::WorkerFailed{0, 3, 1, 139, "signal 11 (SIGSEGV)", "hostb", "THE SUMMARY"});
  auto stop_a = a.expect<proto::Stop>();
  auto stop_b = b.expect<proto::Stop>();
  CHECK(stop_a.exit_status == 139);
  CHECK(stop_a.summary == "THE SUMMARY");
  CHECK(stop_b.summary == "THE SUMMARY");
}

TEST_CASE("every node succeeding completes the run", "[component][daemon]") {
  DaemonThread d;
  Client a(d.daemon.port()), b(d.daemon.port());
  a.hello("job", "a", 2);
  b.hello("job", "b", 2);
  a.expect<proto::RoundAssigned>();
  b.expect<proto::RoundAssigned>();
  a.send(proto::NodeSucceeded{0});
  b.send(proto::NodeSucceeded{0});
  a.expect<proto::Complete>();
  b.expect<proto::Complete>();
}

TEST_CASE("runs with different ids are isolated, mismatched settings are refused",
          "[component][daemon]") {
  DaemonThread d;
  Client a(d.daemon.port()), b(d.daemon.port()), c(d.daemon.port());
  a.hello("one", "a", 1);
  b.hello("two", "b", 1);
  CHECK(a.expect<proto::RoundAssigned>().world_size == 2);
  CHECK(b.expect<proto::RoundAssigned>().world_size == 2);
  c.hello("one", "c", 3);
  auto error = c.expect<proto::Error>();
  CHECK(error.message.find("--nnodes 3 differs from the run's 1") != std::string::npos);
  CHECK_FALSE(c.receive());  // closed
}

TEST_CASE("heartbeats are answered", "[component][daemon]") {
  DaemonThread d;
  Client a(d.daemon.port());
  a.hello("job", "a", 2);
  a.send(proto::Heartbeat{});
  a.expect<proto::HeartbeatAck>();
}

TEST_CASE("malformed frames close only their own connection", "[component][daemon]") {
  DaemonThread d;
  Client good(d.daemon.port());
  good.hello("job", "good", 2);
  Client junk(d.daemon.port()), huge(d.daemon.port()), early(d.daemon.port());
  junk.send_raw(proto::encode_frame("this is not json"));
  CHECK(junk.expect<proto::Error>().message == "frame is not a JSON object");
  CHECK_FALSE(junk.receive());
  huge.send_raw(std::string("\x7f\xff\xff\xff", 4));
  CHECK(huge.expect<proto::Error>().message.find("limit") != std::string::npos);
  early.send(proto::Join{});
  CHECK(early.expect<proto::Error>().message.find("hello") != std::string::npos);
  good.send(proto::Heartbeat{});
  good.expect<proto::HeartbeatAck>();
}

TEST_CASE(
    "a client's probe that leads its connection is read past: a slow daemon still welcomes it",
    "[component][daemon]") {
  DaemonThread d;
  const std::string probe(proto::kSilentPeerProbe);
  Client whole(d.daemon.port()), split(d.daemon.port());
  whole.send_raw(probe);
  whole.hello("job", "whole", 3);
  split.send_raw(probe.substr(0, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // two reads, most likely
  split.send_raw(probe.substr(5));
  split.hello("job", "split", 3);
  split.send(proto::Heartbeat{});
  split.expect<proto::HeartbeatAck>();
}

TEST_CASE("a node that sends the daemon's own messages is closed, the run goes on",
          "[component][daemon]") {
  DaemonThread d;
  Client good(d.daemon.port());
  good.hello("job", "good", 3);  // three nodes: no round forms to answer first
  for (const proto::ControlMessage& message : std::vector<proto::ControlMessage>{
           proto::Notice{"host 10.0.0.9 is excluded"}, proto::Restart{"go"}}) {
    Client rogue(d.daemon.port());
    rogue.hello("job", "rogue", 3);
    rogue.send(message);
    CHECK(rogue.expect<proto::Error>().message ==
          std::string("unexpected message ") + proto::message_type(message));
    CHECK(rogue.closed_by_daemon());
  }
  good.send(proto::Heartbeat{});
  good.expect<proto::HeartbeatAck>();
}

TEST_CASE("a frame of deeply nested arrays closes only its own connection", "[component][daemon]") {
  DaemonThread d;
  Client good(d.daemon.port());
  good.hello("job", "good", 2);
  for (bool after_hello : {false, true}) {
    Client deep(d.daemon.port());
    if (after_hello) deep.hello("deep-run", "deep", 2);  // waits alone: no round
    // 40 KB, depth 20,000: this used to overflow the daemon's stack.
    deep.send_raw(proto::encode_frame(std::string(20000, '[') + std::string(20000, ']')));
    CHECK(deep.expect<proto::Error>().message == "frame is not a JSON object");
    CHECK_FALSE(deep.receive());
  }
  good.send(proto::Heartbeat{});
  good.expect<proto::HeartbeatAck>();
  Client next(d.daemon.port());
  next.hello("other", "next", 1);
  CHECK(next.expect<proto::RoundAssigned>().world_size == 2);
}

TEST_CASE("status lists runs and nodes", "[component][daemon]") {
  DaemonThread d;
  Client a(d.daemon.port());
  a.hello("job", "a", 2);
  Client status(d.daemon.port());
  status.send(proto::StatusRequest{});
  auto reply = status.expect<proto::StatusReply>();
  CHECK(reply.port == d.daemon.port());
  REQUIRE(reply.runs.size() == 1);
  const proto::StatusRun& run = reply.runs[0];
  CHECK(run.run_id == "job");
  CHECK(run.phase == "forming");
  CHECK(run.round == -1);
  CHECK(run.store_port == 0);
  REQUIRE(run.nodes.size() == 1);
  CHECK(run.nodes[0].address == "addr-a");
  CHECK(run.nodes[0].state == "joining");
  CHECK(run.nodes[0].group_rank == -1);
  CHECK(run.nodes[0].local_world_size == 2);
  CHECK_FALSE(run.nodes[0].succeeded);
}

TEST_CASE("with a token, hello and status must prove it, a wrong or missing proof is refused",
          "[component][daemon][auth]") {
  const std::string token = "the daemon's token, 32 bytes...";
  DaemonThread d(token);
  Client member(d.daemon.port(), token);
  member.hello("job", "a", 2);
  for (const std::string& wrong : std::vector<std::string>{"", "another token of the same size"}) {
    INFO("token '" << wrong << "'");
    Client stranger(d.daemon.port(), wrong);
    CHECK(stranger.refused_hello("job", "stranger", wrong).find("authentication failed") == 0);
    CHECK_FALSE(stranger.receive());  // closed
    Client snoop(d.daemon.port());
    auto status = snoop.status("", wrong);
    REQUIRE(std::holds_alternative<proto::Error>(status));
    CHECK(std::get<proto::Error>(status).message.find("authentication failed") == 0);
  }
  // A proof made for another connection's challenge is worth nothing here (no replay).
  Client replay(d.daemon.port());
  proto::Hello copied;
  copied.run_id = "job";
  copied.node_id = "replayed";
  copied.proof = proto::hello_proof(token, member.challenge, "", "job", "replayed");
  replay.send(copied);
  CHECK(replay.expect<proto::Error>().message.find("authentication failed") == 0);
  Client admin(d.daemon.port());
  auto status = admin.status("", token);
  REQUIRE(std::holds_alternative<proto::StatusReply>(status));
  REQUIRE(std::get<proto::StatusReply>(status).runs.size() == 1);
  CHECK(std::get<proto::StatusReply>(status).runs[0].run_id == "job");
}

TEST_CASE("a run's derived token acts on that run only", "[component][daemon][auth]") {
  const std::string token = "the daemon's token, 32 bytes...";
  DaemonThread d(token);
  const std::string blue = proto::derive_run_token(token, "blue");
  Client a(d.daemon.port(), blue);
  a.hello("blue", "a", 1);
  CHECK(a.expect<proto::RoundAssigned>().world_size == 2);
  Client b(d.daemon.port(), token);
  b.hello("red", "b", 2);
  Client intruder(d.daemon.port());  // blue's token for a red node
  CHECK(intruder.refused_hello("red", "intruder", blue).find("authentication failed") == 0);
  Client mine(d.daemon.port());
  auto status = mine.status("blue", blue);
  REQUIRE(std::holds_alternative<proto::StatusReply>(status));
  const auto& runs = std::get<proto::StatusReply>(status).runs;
  REQUIRE(runs.size() == 1);  // red is not shown to blue's token
  CHECK(runs[0].run_id == "blue");
  Client theirs(d.daemon.port());
  CHECK(std::holds_alternative<proto::Error>(theirs.status("red", blue)));
}

TEST_CASE("a run's token asked for every run is told to name its run and not that it is wrong",
          "[component][daemon][auth]") {
  const std::string token = "the daemon's token, 32 bytes...";
  DaemonThread d(token);
  const std::string blue = proto::derive_run_token(token, "blue");
  Client a(d.daemon.port(), blue);
  a.hello("blue", "a", 1);
  a.expect<proto::RoundAssigned>();
  Client all(d.daemon.port());
  auto status = all.status("", blue);
  REQUIRE(std::holds_alternative<proto::Error>(status));
  const std::string& message = std::get<proto::Error>(status).message;
  CHECK(message.find("authentication failed") == 0);
  CHECK(message.find("a run's token shows only its run: give --rdzv-id RUN") != std::string::npos);
  // Naming a run keeps the plain refusal: there the run's token was tried and did not match.
  Client other(d.daemon.port());
  auto red = other.status("red", blue);
  REQUIRE(std::holds_alternative<proto::Error>(red));
  CHECK(std::get<proto::Error>(red).message.find("--rdzv-id") == std::string::npos);
}

TEST_CASE("a status answer proves the token it was asked under, for the tool's nonce",
          "[component][daemon][auth]") {
  const std::string token = "the daemon's token, 32 bytes...";
  DaemonThread d(token);
  const std::string blue = proto::derive_run_token(token, "blue");
  Client a(d.daemon.port(), blue);
  a.hello("blue", "a", 1);
  a.expect<proto::RoundAssigned>();
  std::string digest;  // of the answer as it came
  auto proof_of = [&](const proto::ControlMessage& answer) {
    REQUIRE(std::holds_alternative<proto::StatusReply>(answer));
    digest = std::get<proto::StatusReply>(answer).digest;
    return std::get<proto::StatusReply>(answer).proof;
  };
  Client admin(d.daemon.port());
  std::string proof = proof_of(admin.status("", token, "nonce-1"));
  CHECK(proof == proto::answer_proof(token, "status", admin.challenge, "nonce-1", "", digest));
  Client team(d.daemon.port());
  proof = proof_of(team.status("blue", blue, "nonce-2"));
  CHECK(proof == proto::answer_proof(blue, "status", team.challenge, "nonce-2", "blue", digest));
  CHECK(proof != proto::answer_proof(token, "status", team.challenge, "nonce-2", "blue", digest));
  // The proof covers what the answer says: the same answer with one field changed fails it.
  Client third(d.daemon.port());
  proto::StatusReply changed = std::get<proto::StatusReply>(third.status("blue", blue, "nonce-3"));
  proof = std::exchange(changed.proof, "");
  REQUIRE(changed.runs.size() == 1);
  CHECK(proto::answer_digest(changed) == changed.digest);  // as it came, as the daemon wrote it
  CHECK(proof == proto::answer_proof(blue, "status", third.challenge, "nonce-3", "blue",
                                     proto::answer_digest(changed)));
  changed.runs[0].phase = "completed";
  CHECK(proof != proto::answer_proof(blue, "status", third.challenge, "nonce-3", "blue",
                                     proto::answer_digest(changed)));
  Client older(d.daemon.port());  // a tool that sends no nonce gets no proof (as before)
  CHECK(proof_of(older.status("blue", blue)).empty());
}

TEST_CASE("a forged worker_failed from a connection without the token changes nothing",
          "[component][daemon][auth]") {
  const std::string token = "the daemon's token, 32 bytes...";
  DaemonThread d(token);
  Client a(d.daemon.port(), token), b(d.daemon.port(), token);
  a.hello("job", "a", 2);
  b.hello("job", "b", 2);
  a.expect<proto::RoundAssigned>();
  b.expect<proto::RoundAssigned>();
  Client forger(d.daemon.port());
  proto::Hello hello;
  hello.run_id = "job";
  hello.node_id = "b";  // even claiming a member's node id
  forger.send(hello);
  forger.send(proto::WorkerFailed{0, 3, 1, 77, "forged", "evil", "\x1b[2JOWNED"});
  CHECK(forger.expect<proto::Error>().message.find("authentication failed") == 0);
  CHECK_FALSE(forger.receive());
  // The run goes on: heartbeats are answered, and success completes it.
  a.send(proto::Heartbeat{});
  a.expect<proto::HeartbeatAck>();
  a.send(proto::NodeSucceeded{0});
  b.send(proto::NodeSucceeded{0});
  a.expect<proto::Complete>();
  b.expect<proto::Complete>();
}

TEST_CASE("a client that sends heartbeats but never reads is dropped, others are served",
          "[component][daemon]") {
  DaemonThread d;
  Client flooder(d.daemon.port());
  flooder.hello("other", "flooder", 2);
  int small = 4096;  // little kernel buffering on the reading side: the daemon's queue grows
  ::setsockopt(flooder.socket.native_handle(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  std::string frame = proto::encode_frame(proto::encode_message(proto::Heartbeat{}));
  std::string batch;
  while (batch.size() < (1 << 20)) batch += frame;
  boost::system::error_code error;
  size_t sent = 0;
  // Each heartbeat is answered; unread answers pile up. Bounded: at most 64 MiB are sent.
  while (!error && sent < (size_t{64} << 20)) {
    sent += boost::asio::write(flooder.socket, boost::asio::buffer(batch), error);
  }
  INFO("sent " << sent << " bytes");
  CHECK(error);  // the daemon closed the connection
  CHECK(sent < (size_t{64} << 20));
  Client next(d.daemon.port());  // the daemon goes on serving
  next.hello("next", "n", 1);
  CHECK(next.expect<proto::RoundAssigned>().world_size == 2);
}

TEST_CASE("a connection that never says hello is closed at the hello timeout",
          "[component][daemon]") {
  DaemonOptions options{"127.0.0.1", 0, 0, 0, ""};
  options.hello_timeout = std::chrono::milliseconds(300);
  DaemonThread d(options);
  Client silent(d.daemon.port());
  Client member(d.daemon.port());
  member.hello("job", "m", 2);
  CHECK(silent.closed_by_daemon());
  member.send(proto::Heartbeat{});       // a proven connection has no such deadline
  member.expect<proto::HeartbeatAck>();  // and is answered
}

TEST_CASE("past the caps on connections that have not said hello, the oldest make room",
          "[component][daemon]") {
  DaemonOptions options{"127.0.0.1", 0, 0, 0, ""};
  options.connection_limits = {2, 3, 100};
  DaemonThread d(options);
  uint16_t port = d.daemon.port();
  Client member(port);
  member.hello("job", "m", 2);  // proven: not counted, never evicted
  Stranger oldest(port, "127.0.0.1");
  REQUIRE(oldest.challenged());
  Stranger second(port, "127.0.0.1");
  REQUIRE(second.challenged());
  Stranger third(port, "127.0.0.1");  // past 2 from this address: the oldest of them goes
  REQUIRE(third.challenged());
  CHECK(oldest.closed_by_daemon());
  Stranger elsewhere(port, "127.0.0.2");  // another address has its own share
  REQUIRE(elsewhere.challenged());
  Stranger fourth(port, "127.0.0.3");  // past 3 in all: the oldest anywhere goes
  REQUIRE(fourth.challenged());
  CHECK(second.closed_by_daemon());
  member.send(proto::Heartbeat{});
  member.expect<proto::HeartbeatAck>();
  Client admin(port);  // a status request is answered whatever the strangers hold
  CHECK(std::holds_alternative<proto::StatusReply>(admin.status()));
}

TEST_CASE("past the cap a newcomer waits unread until a stranger proves itself or its grace ends",
          "[component][daemon]") {
  DaemonOptions options{"127.0.0.1", 0, 0, 0, ""};
  options.connection_limits = {2, 10, 100, std::chrono::milliseconds(1000)};
  DaemonThread d(options);
  uint16_t port = d.daemon.port();
  Client member(port);  // challenged: a stranger until its hello
  Stranger silent(port, "127.0.0.1");
  REQUIRE(silent.challenged());
  Stranger waiting(port, "127.0.0.1");  // its address holds 2 young strangers: it waits
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(waiting.socket.available() == 0);
  auto hello_at = std::chrono::steady_clock::now();
  member.hello("job", "m", 2);  // proven: its place goes to the waiting one at once
  REQUIRE(waiting.challenged());
  CHECK(std::chrono::steady_clock::now() - hello_at < std::chrono::milliseconds(500));
  Stranger next(port, "127.0.0.1");  // waits for `silent`, the oldest, to be past its grace
  REQUIRE(next.challenged());
  CHECK(std::chrono::steady_clock::now() - hello_at > std::chrono::milliseconds(500));
  CHECK(silent.closed_by_daemon());
  member.send(proto::Heartbeat{});
  member.expect<proto::HeartbeatAck>();
}

TEST_CASE("before hello, a frame over 64 KiB closes the connection, after it, a larger one is fine",
          "[component][daemon]") {
  DaemonThread d;
  Client stranger(d.daemon.port());
  stranger.send_raw(std::string("\x00\x01\x00\x01", 4));  // announces 65,537 bytes
  CHECK(stranger.expect<proto::Error>().message == "frame larger than the protocol's limit");
  Client member(d.daemon.port());
  member.hello("job", "m", 1);
  auto round = member.expect<proto::RoundAssigned>();
  std::string summary(proto::kMaxFailureSummaryBytes, 's');  // 128 KiB
  member.send(proto::WorkerFailed{round.round, 0, 0, 7, "exit code 7", "host", summary});
  auto stop = member.expect<proto::Stop>();
  CHECK(stop.exit_status == 7);
  CHECK(stop.summary.size() == summary.size());
}

TEST_CASE("a round's worker store refuses an address that is no member's", "[component][daemon]") {
  DaemonThread d;
  Client a(d.daemon.port());
  a.hello("job", "a", 1);
  auto round = a.expect<proto::RoundAssigned>();
  CHECK(store_answers(round.master_addr, round.master_port, "127.0.0.1"));  // the member's
  CHECK_FALSE(store_answers(round.master_addr, round.master_port, "127.0.0.9"));
}

// What `read` returns, read on the daemon's own thread.
template <typename Read>
auto on_daemon_thread(DaemonThread& d, Read read) {
  std::promise<decltype(read())> result;
  boost::asio::post(d.io, [&] { result.set_value(read()); });
  return result.get_future().get();
}

// The value at `key` through a 1.13 GET (opcode 2) to 127.0.0.1:`port`; nullopt when the
// connection closed first.
std::optional<std::string> store_get(uint16_t port, const std::string& key,
                                     const char* from = "127.0.0.1") {
  boost::asio::io_context io;
  ip::tcp::socket socket(io, ip::tcp::endpoint(ip::make_address(from), 0));
  boost::system::error_code error;
  socket.connect(ip::tcp::endpoint(ip::make_address("127.0.0.1"), port), error);
  timeval timeout{5, 0};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  boost::asio::write(socket, boost::asio::buffer(test::u8(2) + test::bytes(key)), error);
  uint64_t size = 0;
  boost::asio::read(socket, boost::asio::buffer(&size, sizeof size), error);
  if (error || size > 1024) return std::nullopt;
  std::string value(size, '\0');
  boost::asio::read(socket, boost::asio::buffer(value), error);
  return error ? std::nullopt : std::optional<std::string>(value);
}

TEST_CASE("an agent's daemon hands a TCPStore client at its control port to the round's store",
          "[component][daemon]") {
  DaemonOptions options{"127.0.0.1", 0, 0, 0, ""};
  options.agent_hosted = true;
  DaemonThread d(options);
  // Before any round: no store to hand it to.
  CHECK_FALSE(store_get(d.daemon.port(), "key"));
  // Agents send the probe first and are challenged at once, not after the silence a TCPStore
  // client never keeps.
  auto connecting = std::chrono::steady_clock::now();
  Client a(d.daemon.port(), {}, true), b(d.daemon.port(), {}, true);
  CHECK(std::chrono::steady_clock::now() - connecting < ControlDoor::kFirstWordsWait);
  a.hello("job", "a", 2);
  b.hello("job", "b", 2);
  auto round = a.expect<proto::RoundAssigned>();
  b.expect<proto::RoundAssigned>();
  REQUIRE(round.master_port != d.daemon.port());
  REQUIRE(store_takes(round.master_port, "key", 3));                // through the store's own port
  CHECK(store_get(d.daemon.port(), "key") == std::string(3, 'v'));  // and through the daemon's
  CHECK_FALSE(store_get(d.daemon.port(), "key", "127.0.0.9"));      // no member's address
  {
    // A peer that says nothing is challenged after the wait, as an agent of before the probe.
    Stranger silent(d.daemon.port(), "127.0.0.1");
    CHECK(silent.challenged());
    // One that sends what may begin a request (an opcode) and no more is challenged too, once
    // the door has looked again for a while (100 x 2 ms): no wait on its bytes is unbounded.
    Stranger halting(d.daemon.port(), "127.0.0.1");
    boost::asio::write(halting.socket, boost::asio::buffer("\x02", 1));
    CHECK(halting.challenged());
  }
  // The rendezvous goes on, on the same port.
  a.send(proto::Heartbeat{});
  CHECK(a.receive().has_value());
  // The connections handed over left nothing in the daemon: once the nodes leave, it is idle.
  for (Client* node : {&a, &b}) {
    node->send(proto::Leave{"done"});
    CHECK(node->closed_by_daemon());
  }
  CHECK(test::wait_until([&] { return on_daemon_thread(d, [&] { return d.daemon.idle(); }); }));
}

TEST_CASE("cohortd's control port closes a TCPStore client: its runs' stores are their own",
          "[component][daemon]") {
  DaemonThread d;
  Client a(d.daemon.port());
  a.hello("job", "a", 1);
  auto round = a.expect<proto::RoundAssigned>();
  REQUIRE(store_takes(round.master_port, "key", 3));
  CHECK_FALSE(store_get(d.daemon.port(), "key"));
}

TEST_CASE("the rounds' stores of all runs share the daemon's store budget", "[component][daemon]") {
  DaemonOptions options{"127.0.0.1", 0, 0, 0, ""};
  options.store_budget_bytes = 3 << 20;
  DaemonThread d(options);
  Client a(d.daemon.port()), b(d.daemon.port());
  a.hello("first", "a", 1);
  int first_store = a.expect<proto::RoundAssigned>().master_port;
  b.hello("second", "b", 1);
  int second_store = b.expect<proto::RoundAssigned>().master_port;
  CHECK(store_takes(first_store, "/a", 2 << 20));
  CHECK_FALSE(store_takes(second_store, "/b", 2 << 20));  // each well under its 1 GiB quota
  CHECK(store_takes(second_store, "/small", 1000));
  a.send(proto::Leave{"done"});  // the first run ends: its store, and what it held, go
  CHECK(a.closed_by_daemon());
  CHECK(test::wait_until([&] { return d.daemon.store_budget()->used() < (1 << 20); },
                         std::chrono::seconds(5)));
  CHECK(store_takes(second_store, "/b", 2 << 20));
}

TEST_CASE("a hello with a run id that is no plain name, or a tiny heartbeat timeout, is refused",
          "[component][daemon]") {
  DaemonThread d;
  auto refusal = [&](const std::string& run_id, int64_t heartbeat_timeout_ms) {
    Client client(d.daemon.port());
    proto::Hello hello;
    hello.run_id = run_id;
    hello.node_id = "n";
    hello.config = {1, 1, 0, 100, 5000, heartbeat_timeout_ms};
    client.send(hello);
    return client.expect<proto::Error>().message;
  };
  CHECK(refusal("../../escape", 5000).find("bad hello: run id: ") == 0);
  CHECK(refusal(std::string(10000, 'x'), 5000).find("bad hello: run id: ") == 0);
  CHECK(refusal("job", 1) == "bad hello: heartbeat_timeout 1 ms is below 200 ms");
  Client asker(d.daemon.port());
  CHECK(std::get<proto::StatusReply>(asker.status()).runs.empty());
}

namespace {

// Nodes a and b of run "job" (two nodes, three restarts), once their first round is assigned.
void join_round_of_two(Client& a, Client& b) {
  a.hello("job", "a", 2, 3);
  b.hello("job", "b", 2, 3);
  a.expect<proto::RoundAssigned>();
  b.expect<proto::RoundAssigned>();
}

}  // namespace

// A leave used to close the connection first: the close reported the node lost ("connection
// closed (left)") and, for the last node, forgot the run while the leave still used it.
TEST_CASE("a node that leaves is lost for its own reason, the last one to leave ends the run",
          "[component][daemon]") {
  DaemonThread d;
  Client a(d.daemon.port()), b(d.daemon.port());
  join_round_of_two(a, b);
  a.send(proto::Leave{"its workers finished"});
  CHECK(a.closed_by_daemon());
  auto restart = b.expect<proto::Restart>();
  CHECK(restart.reason.find("its workers finished") != std::string::npos);
  CHECK(restart.reason.find("connection closed") == std::string::npos);
  b.send(proto::Leave{"stopping too"});
  CHECK(b.closed_by_daemon());
  Client watcher(d.daemon.port());
  auto status = watcher.status();
  REQUIRE(std::holds_alternative<proto::StatusReply>(status));
  CHECK(std::get<proto::StatusReply>(status).runs.empty());
}

TEST_CASE("a run whose last node left for another endpoint is said to have moved there",
          "[component][daemon]") {
  DaemonThread d;
  Client a(d.daemon.port()), b(d.daemon.port());
  join_round_of_two(a, b);
  a.send(proto::Leave{"going first", "early:1"});  // others remain: the run has not moved
  CHECK(a.closed_by_daemon());
  b.expect<proto::Restart>();
  b.send(proto::Leave{"following the run to node2:29400", "node2:29400"});
  CHECK(b.closed_by_daemon());
  auto moved = [&](const std::string& run_id) {
    Client watcher(d.daemon.port());
    watcher.send(proto::StatusRequest{run_id});
    return watcher.expect<proto::StatusReply>();
  };
  proto::StatusReply reply = moved("");
  CHECK(reply.runs.empty());
  REQUIRE(reply.moved_runs.size() == 1);
  CHECK(reply.moved_runs[0].run_id == "job");
  CHECK(reply.moved_runs[0].to == "node2:29400");
  CHECK(moved("other").moved_runs.empty());
  // A stop, or a question about its events, sent here is told where it went.
  std::string told =
      "no run 'job' here: it moved to node2:29400 (its nodes left this daemon for it: ask "
      "there, or give --rdzv-fallback)";
  Client stopper(d.daemon.port());
  stopper.send(proto::StopRunRequest{"job", "", "", "", ""});
  CHECK(stopper.expect<proto::Error>().message == told);
  Client stopper_of_other(d.daemon.port());
  stopper_of_other.send(proto::StopRunRequest{"other", "", "", "", ""});
  CHECK(stopper_of_other.expect<proto::Error>().message == "no run 'other'");
  // The run back here: no longer moved.
  Client c(d.daemon.port());
  c.hello("job", "c", 1, 3);
  reply = moved("job");
  CHECK(reply.runs.size() == 1);
  CHECK(reply.moved_runs.empty());
  c.send(proto::Leave{"stopped by SIGTERM"});  // a last node that leaves for nowhere
  CHECK(c.closed_by_daemon());
  reply = moved("");
  CHECK(reply.runs.empty());
  CHECK(reply.moved_runs.empty());
}

TEST_CASE("a node that reports unhealthy and then leaves is forgotten, status still answers",
          "[component][daemon]") {
  DaemonThread d;
  Client a(d.daemon.port()), sick(d.daemon.port());
  a.hello("job", "a", 1);
  a.expect<proto::RoundAssigned>();
  sick.hello("job", "sick", 1);
  sick.send(proto::Unhealthy{"GPU 0: uncorrectable ECC errors"});
  Client watcher(d.daemon.port());
  auto before = watcher.status();
  REQUIRE(std::holds_alternative<proto::StatusReply>(before));
  REQUIRE(std::get<proto::StatusReply>(before).runs.size() == 1);
  CHECK(std::get<proto::StatusReply>(before).runs[0].nodes.size() == 2);
  sick.send(proto::Leave{"interrupted"});
  CHECK(sick.closed_by_daemon());
  // The daemon used to abort here (the parked node was looked up after it was erased).
  Client after_leave(d.daemon.port());
  auto after = after_leave.status();
  REQUIRE(std::holds_alternative<proto::StatusReply>(after));
  const auto& runs = std::get<proto::StatusReply>(after).runs;
  REQUIRE(runs.size() == 1);
  REQUIRE(runs[0].nodes.size() == 1);
  CHECK(runs[0].nodes[0].node_id == "a");
  a.send(proto::Heartbeat{});
  a.expect<proto::HeartbeatAck>();
}

namespace {

// A hello for a 1-node run whose node id and address are the caller's.
proto::Hello crafted_hello(const std::string& run, const std::string& node_id,
                           const std::string& address) {
  proto::Hello hello;
  hello.run_id = run;
  hello.node_id = node_id;
  hello.address = address;
  hello.local_world_size = 2;
  hello.config = {1, 1, 0, 100, 5000, 5000};
  return hello;
}

bool has_control_bytes(const std::string& text) {
  for (char c : text) {
    if (c == '\x1b' || c == '\x07' || c == '\x9b') return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a node's ESC and BEL bytes reach cohort status and --watch only as visible text",
          "[component][daemon][security]") {
  DaemonThread d;
  Client evil(d.daemon.port());
  proto::Hello hello = crafted_hello("job", "node\x1b]0;owned\x07",
                                     "\x1b[2J\x07"
                                     "addr");
  hello.local_world_size = 3;
  evil.send(hello);
  evil.expect<proto::Welcome>();
  auto round = evil.expect<proto::RoundAssigned>();
  proto::Progress progress;  // the slowest rank's host, as `cohort status` names it
  progress.round = round.round;
  progress.host = "host\x1b]2;title\x07";
  progress.ranks = {{0, 10, 5, 100}, {1, 10, 5, 100}, {2, 10, 5, 300}};  // rank 2: 3 x the median
  evil.send(progress);
  evil.send(proto::Heartbeat{});
  evil.expect<proto::HeartbeatAck>();  // the progress was read before this

  StatusQuery query;
  query.endpoint = "127.0.0.1:" + std::to_string(d.daemon.port());
  query.timeout_ms = 5000;
  StatusFetch fetched = fetch_status(query);
  REQUIRE(fetched.reply);
  REQUIRE(fetched.reply->runs.size() == 1);
  CHECK(fetched.reply->runs[0].nodes[0].address ==
        "\x1b[2J\x07"
        "addr");  // kept as sent
  std::ostringstream table;
  print_status_table(*fetched.reply, table);
  std::string screen = watch_screen(fetched, query, std::chrono::seconds(1), "12:00:00", 0);
  fetched.reply->runs[0].last_failure = "worker \x1b[5mfailed\x07";
  std::string failed_screen =
      watch_screen(fetched, query, std::chrono::seconds(1), "12:00:00", 200);
  for (const std::string& text : {table.str(), screen, failed_screen}) {
    INFO(text);
    CHECK_FALSE(has_control_bytes(text));
  }
  CHECK(table.str().find("\\x1b[2J\\x07addr") != std::string::npos);
  CHECK(table.str().find("(node\\x1b]0;owned\\x07)") != std::string::npos);
  CHECK(table.str().find("host\\x1b]2;title\\x07") != std::string::npos);
  CHECK(screen.find("\\x1b[2J\\x07addr") != std::string::npos);
  CHECK(failed_screen.find("worker \\x1b[5mfailed\\x07") != std::string::npos);
}

namespace {

// The run's events as the daemon holds them, through an `events` request.
std::vector<std::string> events_of(const DaemonThread& d, const std::string& run) {
  Client asking(d.daemon.port());
  asking.send(proto::EventsRequest{run, ""});
  return asking.expect<proto::EventsReply>().events;
}

bool has_event(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& line : lines) {
    if (line.find(part) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("the daemon's events give a node's host and a failure by its summary's meaningful line",
          "[component][daemon][events]") {
  DaemonThread d;
  Client node(d.daemon.port());
  node.send(crafted_hello("job", "n1", "127.0.0.2"));
  node.expect<proto::Welcome>();
  auto round = node.expect<proto::RoundAssigned>();
  proto::Progress progress;  // the node's host, as its progress reports give it
  progress.round = round.round;
  progress.host = "node-a";
  progress.ranks = {{0, 10, 5, 100}};
  node.send(progress);
  node.send(proto::WorkerFailed{round.round, 0, 0, 1, "exit code 1", "node-a",
                                "=========\ntrain.py FAILED\n---------\n"});
  node.expect<proto::Stop>();
  node.socket.close();
  std::vector<std::string> lines;
  bool left = cohort::test::wait_until(
      [&] {
        lines = events_of(d, "job");
        return has_event(lines, "\"event\":\"node.left\"");
      },
      std::chrono::seconds(5));
  INFO(cohort::join(lines, "\n"));
  REQUIRE(left);
  CHECK(has_event(lines, "\"summary\":\"train.py FAILED\""));
  CHECK_FALSE(has_event(lines, "\"summary\":\"====="));
  // The node's leaving, recorded after its progress report, names its host.
  for (const std::string& line : lines) {
    if (line.find("\"event\":\"node.left\"") != std::string::npos)
      CHECK(line.find("\"host\":\"node-a\"") != std::string::npos);
  }
}

namespace {

// The run's events once one of them is `name` (at most 5 s), as JSON; the last such event.
nlohmann::json wait_for_event(const DaemonThread& d, const std::string& run,
                              const std::string& name, std::vector<std::string>& lines) {
  nlohmann::json found;
  cohort::test::wait_until(
      [&] {
        lines = events_of(d, run);
        for (const std::string& line : lines) {
          nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
          if (event.is_object() && event.value("event", "") == name) found = event;
        }
        return found.is_object();
      },
      std::chrono::seconds(5));
  return found;
}

}  // namespace

// Such a run was forgotten without an end: its timeline page said "running" for ever.
TEST_CASE("a run whose nodes all went while it ran records run.abandoned and an ended one does not",
          "[component][daemon][events]") {
  DaemonThread d;
  Client closed(d.daemon.port()), left(d.daemon.port()), moved(d.daemon.port());
  Client done(d.daemon.port());
  closed.hello("closed", "a", 1, 3);
  left.hello("left", "b", 1, 3);
  moved.hello("moved", "c", 1, 3);
  done.hello("done", "d", 1, 3);
  for (Client* client : {&closed, &left, &moved, &done}) client->expect<proto::RoundAssigned>();
  closed.socket.close();
  left.send(proto::Leave{"stopped by SIGTERM"});
  moved.send(proto::Leave{"following the run to node2:29400", "node2:29400"});
  done.send(proto::NodeSucceeded{0});
  done.expect<proto::Complete>();
  done.socket.close();
  std::vector<std::string> lines;
  for (const char* run : {"closed", "left"}) {
    nlohmann::json abandoned = wait_for_event(d, run, "run.abandoned", lines);
    INFO(cohort::join(lines, "\n"));
    REQUIRE(abandoned.is_object());
    CHECK(abandoned["reason"] == "its last node left");
    CHECK(abandoned["round"] == 0);
    CHECK_FALSE(abandoned.contains("moved_to"));
  }
  nlohmann::json abandoned = wait_for_event(d, "moved", "run.abandoned", lines);
  REQUIRE(abandoned.is_object());
  CHECK(abandoned["reason"] == "its nodes moved to node2:29400");
  CHECK(abandoned["moved_to"] == "node2:29400");
  CHECK(wait_for_event(d, "done", "node.left", lines).is_object());
  CHECK(has_event(lines, "\"event\":\"run.completed\""));
  CHECK_FALSE(has_event(lines, "run.abandoned"));
}

// Every loss started the time to recover: a pending node's loss while the run formed was timed
// to its first round, a spare's to the next restart.
TEST_CASE("node.lost says member only for a node of the current round",
          "[component][daemon][events]") {
  DaemonThread d;
  Client pending(d.daemon.port());
  pending.hello("forming", "p", 2, 3);
  pending.socket.close();
  std::vector<std::string> lines;
  nlohmann::json lost = wait_for_event(d, "forming", "node.lost", lines);
  REQUIRE(lost.is_object());
  CHECK_FALSE(lost.contains("member"));
  Client member(d.daemon.port()), spare(d.daemon.port());
  member.hello("job", "a", 1, 3);
  member.expect<proto::RoundAssigned>();
  spare.hello("job", "s", 1, 3);
  spare.socket.close();
  lost = wait_for_event(d, "job", "node.lost", lines);
  REQUIRE(lost.is_object());
  CHECK(lost["node"] == "s");
  CHECK_FALSE(lost.contains("member"));
  member.socket.close();
  REQUIRE(wait_for_event(d, "job", "run.abandoned", lines).is_object());
  lost = wait_for_event(d, "job", "node.lost", lines);  // the last one
  CHECK(lost["node"] == "a");
  CHECK(lost["member"] == true);
}

TEST_CASE("a hello whose node id or address is over 255 bytes is refused, saying so",
          "[component][daemon][security]") {
  DaemonThread d;
  const std::string long_text(256, 'x'), longest(255, 'y');
  for (auto [hello, said] :
       {std::pair{crafted_hello("job", long_text, "addr"), "node_id is 256 bytes, over 255"},
        std::pair{crafted_hello("job", "n", std::string(60000, 'a')),
                  "address is 60000 bytes, over 255"}}) {
    Client client(d.daemon.port());
    client.send(hello);
    std::string error = client.expect<proto::Error>().message;
    CHECK(error.find(said) != std::string::npos);
    CHECK_FALSE(client.receive());  // closed
  }
  Client fine(d.daemon.port());
  fine.send(crafted_hello("job", longest, longest));
  fine.expect<proto::Welcome>();
  Client admin(d.daemon.port());
  auto status = std::get<proto::StatusReply>(admin.status());
  REQUIRE(status.runs.size() == 1);
  REQUIRE(status.runs[0].nodes.size() == 1);
  CHECK(status.runs[0].nodes[0].address == longest);
}

TEST_CASE("a status reply lists a bounded number of nodes and counts the rest",
          "[component][daemon]") {
  DaemonOptions options{"127.0.0.1", 0, 0, 0, ""};
  options.status_node_limit = 3;
  DaemonThread d(options);
  std::vector<std::unique_ptr<Client>> nodes;
  for (const char* run : {"blue", "red"}) {
    for (int i = 0; i < 3; ++i) {
      nodes.push_back(std::make_unique<Client>(d.daemon.port()));
      nodes.back()->hello(run, std::string(run) + std::to_string(i), 4);
    }
  }
  Client admin(d.daemon.port());
  auto status = std::get<proto::StatusReply>(admin.status());
  REQUIRE(status.runs.size() == 2);
  CHECK(status.runs[0].nodes.size() == 3);
  CHECK(status.runs[0].more_nodes == 0);
  CHECK(status.runs[1].nodes.empty());
  CHECK(status.runs[1].more_nodes == 3);
  std::ostringstream table;
  print_status_table(status, table);
  CHECK(table.str().find("... and 3 more nodes") != std::string::npos);
  std::string document = proto::encode_status_document(status);
  std::string error;
  auto back = proto::decode_status_document(document, error);
  REQUIRE(back);
  CHECK(back->runs[1].more_nodes == 3);
}

TEST_CASE("a brief status lists no node and counts the run's live ones, not the asker's own",
          "[component][daemon][fallback]") {
  DaemonThread d;
  std::vector<std::unique_ptr<Client>> nodes;
  for (const char* id : {"far:1#0", "far:1#1", "me:2#0"}) {
    nodes.push_back(std::make_unique<Client>(d.daemon.port()));
    nodes.back()->hello("job", id, 4);
  }
  Client agent(d.daemon.port());
  agent.send(proto::StatusRequest{"job", "", "", /*brief=*/true, "me:2#"});
  auto reply = agent.expect<proto::StatusReply>();
  REQUIRE(reply.runs.size() == 1);
  const proto::StatusRun& run = reply.runs[0];
  CHECK(run.run_id == "job");
  CHECK(run.phase == "forming");
  CHECK(run.max_nodes == 4);
  CHECK(run.nodes.empty());
  CHECK(run.slowest.empty());
  CHECK(run.more_nodes == 3);
  CHECK(run.live_nodes == 2);
  Client tool(d.daemon.port());  // a full status, as cohort status asks: no count
  auto full = std::get<proto::StatusReply>(tool.status("job"));
  REQUIRE(full.runs.size() == 1);
  CHECK(full.runs[0].nodes.size() == 3);
  CHECK(full.runs[0].live_nodes == -1);
  // cohort status --brief: every node counted (it asks for no prefix), none listed.
  StatusQuery query;
  query.endpoint = "127.0.0.1:" + std::to_string(d.daemon.port());
  query.brief = true;
  StatusFetch fetched = fetch_status(query);
  REQUIRE(fetched.reply);
  std::ostringstream table;
  print_status_table(*fetched.reply, table);
  CHECK(table.str() ==
        "run job: forming, waiting for the first round, restarts 0/0, nodes 4:4, worker store "
        "port 0\n"
        "  3 nodes, 3 heard within the heartbeat timeout\n");
}

TEST_CASE(
    "a status or events reply left unread closes at its deadline, past the budget the next "
    "request is told busy",
    "[component][daemon][security]") {
  DaemonOptions options{"127.0.0.1", 0, 0, 0, ""};
  options.reply_read_timeout = std::chrono::milliseconds(1000);
  options.max_pending_reply_bytes = size_t{1} << 20;
  DaemonThread d(options);
  // A forming run whose events fill several MiB: failures of a round that never was, each one
  // recorded with its kilobyte of description.
  Client node(d.daemon.port());
  proto::Hello hello = crafted_hello("job", "n1", "127.0.0.2");
  hello.config = {2, 2, 0, 100, 60000, 60000};
  node.send(hello);
  node.expect<proto::Welcome>();
  std::string failures;
  for (int i = 0; i < 5000; ++i) {
    failures += proto::encode_frame(proto::encode_message(proto::WorkerFailed{
        7, i, 0, 1, std::string(proto::kMaxFailureTextBytes, 'd'), "h", "summary"}));
  }
  node.send_raw(failures);
  node.send(proto::Heartbeat{});
  node.expect<proto::HeartbeatAck>();  // every failure is in
  Client unread(d.daemon.port());
  int small = 4096;  // little kernel buffering on the reading side: the reply waits in the daemon
  ::setsockopt(unread.socket.native_handle(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  unread.send(proto::EventsRequest{"job", ""});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Client busy(d.daemon.port());
  busy.send(proto::StatusRequest{});
  CHECK(busy.expect<proto::Error>().message.find("busy") != std::string::npos);
  // Past its deadline the unread reply is dropped (a reset: the kernel's copy goes too), and the
  // budget is free again.
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  CHECK(unread.closed_by_daemon());
  Client later(d.daemon.port());
  later.send(proto::StatusRequest{});
  CHECK(later.expect<proto::StatusReply>().runs.size() == 1);
}

TEST_CASE("a node's host is forgotten with the node: one that comes back under its id has none",
          "[component][daemon][events]") {
  DaemonThread d;
  proto::Hello hello = crafted_hello("job", "n1", "127.0.0.2");
  hello.config = {3, 3, 0, 100, 60000, 60000};  // forming until the test ends
  Client anchor(d.daemon.port());
  proto::Hello anchor_hello = hello;
  anchor_hello.node_id = "anchor";
  anchor.send(anchor_hello);
  anchor.expect<proto::Welcome>();
  {
    Client node(d.daemon.port());
    node.send(hello);
    node.expect<proto::Welcome>();
    proto::Progress progress;
    progress.host = "node-a";
    node.send(progress);
    node.send(proto::Leave{"bye"});
    CHECK(node.closed_by_daemon());
  }
  Client again(d.daemon.port());
  again.send(hello);
  again.expect<proto::Welcome>();
  std::vector<std::string> lines = events_of(d, "job");
  INFO(cohort::join(lines, "\n"));
  std::vector<std::string> joined;
  for (const std::string& line : lines) {
    if (line.find("\"event\":\"node.joined\"") != std::string::npos &&
        line.find("\"node\":\"n1\"") != std::string::npos)
      joined.push_back(line);
  }
  REQUIRE(joined.size() == 2);
  CHECK(joined[1].find("node-a") == std::string::npos);
}

TEST_CASE(
    "after a run ended, a stop or a node started before the end is told, an older agent opens a "
    "run",
    "[component][daemon]") {
  DaemonThread d;
  {
    Client a(d.daemon.port());
    a.send(crafted_hello("job", "a", "addr-a"));
    a.expect<proto::Welcome>();
    a.expect<proto::RoundAssigned>();
    a.send(proto::NodeSucceeded{0});
    a.expect<proto::Complete>();
  }
  auto runs = [&] {
    Client query(d.daemon.port());
    return std::get<proto::StatusReply>(query.status()).runs.size();
  };
  REQUIRE(test::wait_until([&] { return runs() == 0; },
                           std::chrono::seconds(5)));  // forgotten once its node left
  // A stop sent now is told the run had already ended, not that there is no such run.
  Client stopper(d.daemon.port());
  stopper.send(proto::StopRunRequest{"job", "", "", "", ""});
  proto::StopRunReply stopped = stopper.expect<proto::StopRunReply>();
  CHECK(stopped.run_id == "job");
  CHECK_FALSE(stopped.stopped);
  CHECK(stopped.nodes == 0);

  Client late(d.daemon.port());
  proto::Hello started_long_ago = crafted_hello("job", "late", "addr-late");
  started_long_ago.age_ms = 3600 * 1000;
  late.send(started_long_ago);
  late.expect<proto::Welcome>();
  proto::Notice told = late.expect<proto::Notice>();
  CHECK(told.text.find("run 'job' completed ") == 0);
  late.expect<proto::Complete>();
  CHECK(late.closed_by_daemon());
  CHECK(runs() == 0);

  Client older(d.daemon.port());  // says nothing of its age: joins as before
  older.send(crafted_hello("job", "older", "addr-older"));
  older.expect<proto::Welcome>();
  older.expect<proto::RoundAssigned>();
}

namespace {

// A hello of a node with one worker for run "job" with these settings.
proto::Hello job_hello(const std::string& node, proto::WireRunConfig config) {
  proto::Hello hello;
  hello.run_id = "job";
  hello.node_id = node;
  hello.address = "addr-" + node;
  hello.local_world_size = 1;
  hello.config = std::move(config);
  return hello;
}

// Whether the daemon sends the client something, or closes, within `limit` (5 s). Asked before a
// receive whose message only a fix brings: asio's blocking read, unlike its socket's receive
// timeout, waits for ever.
bool hears_from_daemon(Client& client, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  return wait_for_fd(client.socket.native_handle(), POLLIN, deadline) == FdWait::Ready;
}

}  // namespace

TEST_CASE("with fallbacks, a member that failed one health check counts for the quorum again",
          "[component][daemon][health]") {
  DaemonThread d;
  Client a(d.daemon.port()), x(d.daemon.port());
  proto::WireRunConfig config{1, 2, 3, 1000, 2000, 5000};
  config.fallbacks = "127.0.0.1:1";
  a.send(job_hello("a", config));
  x.send(job_hello("x", config));
  for (Client* client : {&a, &x}) {
    client->expect<proto::Welcome>();
    CHECK(client->expect<proto::RoundAssigned>().round == 0);
  }
  a.send(proto::WorkerFailed{0, 0, 0, 1, "exit code 1", "hosta", "SUMMARY"});
  a.expect<proto::Restart>();
  x.expect<proto::Restart>();
  a.send(proto::Join{});
  x.send(proto::Unhealthy{"GPU 0: uncorrectable ECC errors"});
  x.send(proto::Join{});  // its next check passed
  // Both members of round 0 are back: a majority, not "1 came" at the join timeout.
  auto round = a.expect<proto::RoundAssigned>();
  CHECK(round.round == 1);
  CHECK(round.group_world_size == 2);
  CHECK(x.expect<proto::RoundAssigned>().round == 1);
}

TEST_CASE("a node unhealthy at the join timeout is told with the others, and the id is free again",
          "[component][daemon][health]") {
  DaemonThread d;
  Client a(d.daemon.port()), sick(d.daemon.port());
  proto::WireRunConfig config{2, 2, 0, 100, 500, 5000};
  a.send(job_hello("a", config));
  a.expect<proto::Welcome>();
  proto::Hello sick_hello = job_hello("sick", config);
  sick_hello.unhealthy = "GPU 0: uncorrectable ECC errors";
  sick.send(sick_hello);
  sick.expect<proto::Welcome>();
  std::string told = a.expect<proto::Error>().message;
  CHECK(told.find("rendezvous timed out") == 0);
  REQUIRE(hears_from_daemon(sick));
  CHECK(sick.expect<proto::Error>().message == told);
  CHECK(sick.closed_by_daemon());
  // The job started again under the same id opens a fresh run.
  Client again(d.daemon.port());
  again.send(job_hello("again", config));
  again.expect<proto::Welcome>();
  CHECK(again.expect<proto::Waiting>().joined == 1);
}

// A run that never formed left no ending in the events: its page said "forming" for ever.
TEST_CASE("a run that times out forming records run.failed and the id opens a fresh run",
          "[component][daemon][events]") {
  DaemonThread d;
  Client a(d.daemon.port());
  proto::WireRunConfig config{2, 2, 0, 100, 300, 5000};
  a.send(job_hello("a", config));
  a.expect<proto::Welcome>();
  std::string told = a.expect<proto::Error>().message;
  REQUIRE(told.find("rendezvous timed out") == 0);
  std::vector<std::string> lines;
  nlohmann::json failed = wait_for_event(d, "job", "run.failed", lines);
  INFO(cohort::join(lines, "\n"));
  REQUIRE(failed.is_object());
  CHECK(failed["reason"] == told);
  CHECK(failed["exit_status"] == kExitRendezvous);
  CHECK_FALSE(has_event(lines, "run.abandoned"));
  Client again(d.daemon.port());
  again.send(job_hello("again", config));
  again.expect<proto::Welcome>();
  CHECK(again.expect<proto::Waiting>().joined == 1);
}

TEST_CASE("a node unhealthy from its hello that falls silent is lost like any other",
          "[component][daemon][health]") {
  DaemonThread d;
  Client sick(d.daemon.port());
  proto::Hello hello = job_hello("sick", {2, 2, 0, 100, 60000, 300});
  hello.unhealthy = "GPU 0: uncorrectable ECC errors";
  sick.send(hello);
  sick.expect<proto::Welcome>();
  REQUIRE(hears_from_daemon(sick));  // it sends no heartbeat
  proto::Error lost = sick.expect<proto::Error>();
  CHECK(lost.message.find("no heartbeat") == 0);
  CHECK(lost.rejoin);
  CHECK(sick.closed_by_daemon());
  Client watcher(d.daemon.port());
  CHECK(std::get<proto::StatusReply>(watcher.status()).runs.empty());
}
