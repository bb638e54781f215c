// RunProbe against a real daemon on 127.0.0.1:0, with a run token and a node of the run connected
// by the agent's own client, all on the test's io_context: it counts the run's other live nodes
// (not the asking agent's own, not another run's), gets nothing from a wrong token, a run that
// ended, a closed port, a peer that never answers (at its deadline) or one that sends what no
// daemon would (at once); and the count itself.
#include "rendezvous/run_probe.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <optional>

#include "common/asio_clock.hpp"
#include "common/free_port.hpp"
#include "proto/control_frame.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/daemon.hpp"
#include "tests/support/io_steps.hpp"

using namespace cohort;
using namespace std::chrono_literals;
namespace ip = boost::asio::ip;

namespace {

const std::string kToken = "probe-token-0123456789abcdef0123456789";

struct ProbeTest {
  boost::asio::io_context io;
  AsioClock clock{io};
  RendezvousDaemon daemon{io, clock, DaemonOptions{"127.0.0.1", 0, 0, 0, kToken}};
  std::unique_ptr<RendezvousClient> node;  ///< a node of run "job", once join() made it one

  ProbeTest() { REQUIRE_FALSE(daemon.start()); }
  ~ProbeTest() {
    node.reset();
    daemon.stop();
    test::settle(io);
  }

  // A node "other-host:1#0" joins run "job" (up to 3 nodes: it waits for more).
  void join() {
    ClientOptions options{"127.0.0.1", daemon.port(), 1000ms, 5000ms, 5000ms, kToken};
    node = std::make_unique<RendezvousClient>(
        io, clock, options, [](proto::ControlMessage) {},
        [](ConnectionLoss, const std::string&) {});
    proto::Hello hello;
    hello.run_id = "job";
    hello.node_id = "other-host:1#0";
    hello.address = "127.0.0.1";
    hello.local_world_size = 1;
    hello.config = {2, 3, 0, 100, 5000, 5000};
    node->connect(hello);
    REQUIRE(test::run_io_until(io, [&] { return node->welcomed(); }));
  }

  RunProbeTarget target(uint16_t port) const {
    RunProbeTarget target;
    target.host = "127.0.0.1";
    target.port = port;
    target.run_id = "job";
    target.token = kToken;
    target.own_node_id = "this-host:2#";
    target.heartbeat_timeout = 5000ms;
    target.deadline = 1000ms;
    return target;
  }

  using Answer = RunProbeAnswer;
  // The probe's one answer (it must come within 5 s).
  Answer ask(const RunProbeTarget& target) {
    std::optional<Answer> answer;
    RunProbe probe(io, clock, target, [&](const RunProbeAnswer& got) {
      REQUIRE_FALSE(answer);
      answer = got;
    });
    probe.start();
    REQUIRE(test::run_io_until(io, [&] { return answer.has_value(); }));
    test::settle(io);  // nothing more comes
    return *answer;
  }
};

}  // namespace

TEST_CASE("a probe counts the run's other live nodes at the daemon, proven under the run's token",
          "[component][fallback]") {
  ProbeTest test;
  test.join();
  RunProbeTarget target = test.target(test.daemon.port());
  ProbeTest::Answer answer = test.ask(target);
  CHECK(answer.live_nodes == 1);
  CHECK(answer.problem.empty());
  CHECK(answer.heard);
  SECTION("the asking agent's own nodes are not counted") {
    target.own_node_id = "other-host:1#";
    CHECK(test.ask(target).live_nodes == 0);
  }
  SECTION("another run's are not") {
    target.run_id = "other-job";
    answer = test.ask(target);
    CHECK(answer.live_nodes == 0);
    CHECK(answer.heard);  // a daemon that has no such run answered
  }
  SECTION("a wrong token gets the daemon's refusal, no count") {
    target.token = "wrong-token-0123456789abcdef0123456789";
    answer = test.ask(target);
    CHECK(answer.live_nodes == 0);
    CHECK_FALSE(answer.problem.empty());
    CHECK(answer.heard);
  }
  SECTION("a node that left is gone from the count") {
    test.node->close(proto::Leave{"done"});
    test::settle(test.io);
    CHECK(test.ask(target).live_nodes == 0);
  }
}

TEST_CASE("a probe of a closed port answers at once, of a silent peer at its deadline",
          "[component][fallback]") {
  ProbeTest test;
  SECTION("closed") {
    RunProbeTarget target = test.target(pick_free_port("127.0.0.1"));
    auto start = std::chrono::steady_clock::now();
    ProbeTest::Answer answer = test.ask(target);
    CHECK(answer.live_nodes == 0);
    CHECK_FALSE(answer.problem.empty());
    CHECK(answer.heard);  // the host answered: nothing listens there
    CHECK(std::chrono::steady_clock::now() - start < 1s);
  }
  SECTION("accepted, never a challenge") {
    ip::tcp::acceptor silent(test.io, ip::tcp::endpoint(ip::address_v4::loopback(), 0));
    ip::tcp::socket accepted(test.io);
    silent.async_accept(accepted, [](const boost::system::error_code&) {});
    RunProbeTarget target = test.target(silent.local_endpoint().port());
    target.deadline = 300ms;
    auto start = std::chrono::steady_clock::now();
    ProbeTest::Answer answer = test.ask(target);
    auto took = std::chrono::steady_clock::now() - start;
    CHECK(answer.live_nodes == 0);
    CHECK(answer.problem == "no answer within 0.3s");
    CHECK_FALSE(answer.heard);  // silence, as from a cut network
    CHECK(took >= 300ms);
    CHECK(took < 2s);
  }
}

TEST_CASE("a probe of a peer that is no daemon ends at once, whatever its first bytes",
          "[component][fallback]") {
  ProbeTest test;
  ip::tcp::acceptor stranger(test.io, ip::tcp::endpoint(ip::address_v4::loopback(), 0));
  ip::tcp::socket accepted(test.io);
  std::string bytes;
  SECTION("a first frame announced at 512 KiB (a challenge is small), 65 KiB of it sent") {
    bytes = std::string("\x00\x08\x00\x00", 4) + std::string(65 << 10, '[');
  }
  SECTION("no frame at all") { bytes = "SSH-2.0-OpenSSH_9.2\r\n"; }
  SECTION("a frame of deeply nested arrays") {
    std::string nested = std::string(100000, '[') + std::string(100000, ']');
    bytes = proto::encode_frame(nested);
  }
  stranger.async_accept(accepted, [&](const boost::system::error_code& error) {
    if (!error) boost::asio::write(accepted, boost::asio::buffer(bytes));
  });
  RunProbeTarget target = test.target(stranger.local_endpoint().port());
  target.deadline = 3000ms;
  auto start = std::chrono::steady_clock::now();
  ProbeTest::Answer answer = test.ask(target);
  CHECK(answer.live_nodes == 0);
  CHECK_FALSE(answer.problem.empty());
  CHECK(answer.heard);
  CHECK(std::chrono::steady_clock::now() - start < 1s);  // not the deadline: the bytes end it
}

TEST_CASE("only a forming (unless asked for a round) or running run's nodes heard lately count",
          "[component][fallback]") {
  RunProbeTarget target;
  target.run_id = "job";
  target.own_node_id = "me:1#";
  target.heartbeat_timeout = 5000ms;
  proto::StatusRun run;
  run.run_id = "job";
  run.phase = "running";
  for (auto [id, age] :
       {std::pair{"a:1#0", 100}, {"b:2#3", 5000}, {"c:3#0", 5001}, {"me:1#2", 0}}) {
    proto::StatusNode node;
    node.node_id = id;
    node.heartbeat_age_ms = age;
    run.nodes.push_back(node);
  }
  proto::StatusReply reply;
  reply.runs.push_back(run);
  CHECK(live_nodes_elsewhere(reply, target) == 2);  // a and b; c is silent, me#2 is this agent
  reply.runs[0].phase = "forming";
  CHECK(live_nodes_elsewhere(reply, target) == 2);
  target.running_only = true;  // a later endpoint's run: only one in a round draws a node on
  CHECK(live_nodes_elsewhere(reply, target) == 0);
  reply.runs[0].phase = "running";
  CHECK(live_nodes_elsewhere(reply, target) == 2);
  target.running_only = false;
  reply.runs[0].phase = "completed";
  CHECK(live_nodes_elsewhere(reply, target) == 0);
  reply.runs[0].phase = "running";
  reply.runs[0].live_nodes = 7;  // a brief reply: the daemon's count, not the list's (an older
  CHECK(live_nodes_elsewhere(reply, target) == 7);  // daemon's full reply has none: counted here)
  reply.runs[0].run_id = "another";
  CHECK(live_nodes_elsewhere(reply, target) == 0);
}
