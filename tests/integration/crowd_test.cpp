// A crowd is not an attack: thousands of agents behind one address (as behind a NAT) connect to
// cohortd at the same instant while strangers storm it (silent connections and garbage first
// frames, from that address and from many others). Every agent gets its round, and members
// already in stay in.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <thread>

#include "common/fd_limit.hpp"
#include "proto/control_frame.hpp"
#include "rendezvous/control_session.hpp"
#include "tests/integration/multinode_support.hpp"
#include "tests/integration/siege_support.hpp"

using namespace cohort::test;
namespace ip = boost::asio::ip;
namespace proto = cohort::proto;
using cohort::ControlSession;

namespace {

// `count` simulated agents of run `run_id` on the caller's io_context, all connecting at once
// from 127.0.0.1: each answers the daemon's challenge with a hello (fixed size `count`) and waits
// for its round; afterwards heartbeat() has each send a heartbeat. Any agent whose connection
// closes is counted lost, as a real agent would lose its place (it would connect again).
// Owned by the test; the io_context's thread.
class Crowd {
 public:
  Crowd(boost::asio::io_context& io, int port, std::string run_id, int count)
      : io_(io), run_id_(std::move(run_id)), count_(count), sessions_(count) {
    ip::tcp::endpoint daemon(ip::make_address("127.0.0.1"), static_cast<uint16_t>(port));
    for (int index = 0; index < count; ++index) {
      auto socket = std::make_shared<ip::tcp::socket>(io_);
      socket->async_connect(daemon, [this, index, socket](const boost::system::error_code& error) {
        if (error) return lose(index, "connect: " + error.message());
        on_connected(index, std::move(*socket));
      });
    }
  }
  ~Crowd() {
    for (auto& session : sessions_) {
      if (session) session->abandon();
    }
  }

  int rounds() const { return rounds_; }
  int acks() const { return acks_; }
  int lost() const { return lost_; }
  const std::string& first_loss() const { return first_loss_; }

  void heartbeat() {
    for (auto& session : sessions_) {
      if (session && session->open()) session->send(proto::Heartbeat{});
    }
  }

 private:
  void on_connected(int index, ip::tcp::socket socket) {
    auto& session = sessions_[static_cast<size_t>(index)];
    session = std::make_shared<ControlSession>(
        std::move(socket),
        [this, index](ControlSession& from, proto::ControlMessage message) {
          if (std::holds_alternative<proto::Challenge>(message)) {
            from.send(hello(index));
          } else if (std::holds_alternative<proto::RoundAssigned>(message)) {
            ++rounds_;
          } else if (std::holds_alternative<proto::HeartbeatAck>(message)) {
            ++acks_;
          } else if (auto* error = std::get_if<proto::Error>(&message)) {
            lose(index, "refused: " + error->message);
          }
        },
        [this, index](ControlSession&, const std::string& reason) { lose(index, reason); });
    session->start();
  }

  proto::Hello hello(int index) const {
    proto::Hello hello;
    hello.run_id = run_id_;
    hello.node_id = run_id_ + "-" + std::to_string(index);
    hello.address = "10.1." + std::to_string(index >> 8) + "." + std::to_string(index & 255);
    hello.local_world_size = 8;
    hello.config = {count_, count_, 0, 1000, 600000, 600000};
    return hello;
  }

  void lose(int index, const std::string& why) {
    if (lost_++ == 0) first_loss_ = "agent " + std::to_string(index) + ": " + why;
  }

  boost::asio::io_context& io_;
  std::string run_id_;
  int count_;
  std::vector<std::shared_ptr<ControlSession>> sessions_;
  int rounds_ = 0;
  int acks_ = 0;
  int lost_ = 0;
  std::string first_loss_;
};

// Runs `io` until `done` holds or `limit` passes; true when it held.
template <typename Done>
bool run_until(boost::asio::io_context& io, Done done, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < until) io.run_for(20ms);
  return done();
}

// Keeps connecting from 127.0.0.1 and from 50 other loopback addresses (127.0.2.x) to
// 127.0.0.1:port, each connection sending a frame that is no message and closing; on a thread of
// its own until destroyed.
class GarbageStorm {
 public:
  explicit GarbageStorm(int port) : port_(port) {
    thread_ = std::thread([this] {
      std::string garbage = proto::encode_frame("{\"type\": \"no such message\"");
      for (int turn = 0; !stop_; ++turn) {
        int a = turn % 51;
        std::string from = a == 0 ? "127.0.0.1" : "127.0.2." + std::to_string(a);
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in source{};
        source.sin_family = AF_INET;
        ::inet_pton(AF_INET, from.c_str(), &source.sin_addr);
        (void)::bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof source);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(static_cast<uint16_t>(port_));
        ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
          (void)::send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL);
          ++sent_;
        }
        ::close(fd);
        if (turn % 51 == 50) std::this_thread::sleep_for(5ms);
      }
    });
  }
  ~GarbageStorm() {
    stop_ = true;
    thread_.join();
  }
  size_t sent() const { return sent_; }

 private:
  int port_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> sent_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE("3000 agents behind one address connecting at once all get their round in a storm",
          "[integration][security]") {
  cohort::raise_fd_limit();
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  // 1,200 silent strangers on 20 addresses (past the cap of 1,024), 200 more from the agents'
  // own address, and garbage from 51 addresses, all kept up while the crowd comes.
  SilentSiege siege(cluster.port(), 20, 60);
  SilentSiege neighbours(cluster.port(), 1, 200, 0);
  GarbageStorm garbage(cluster.port());
  std::this_thread::sleep_for(500ms);
  boost::asio::io_context io;
  Crowd crowd(io, cluster.port(), "crowd", 3000);
  bool all = run_until(
      io, [&] { return crowd.rounds() == 3000 || crowd.lost() > 0; }, 120s);
  INFO(crowd.first_loss() << "\n" << cluster.daemon().err().substr(0, 4000));
  CHECK(crowd.lost() == 0);
  CHECK(all);
  CHECK(crowd.rounds() == 3000);
  CHECK(siege.reopened() > 0);  // silent strangers were evicted all along, and came back
  CHECK(garbage.sent() > 0);
  CHECK(process_alive(cluster.daemon().pid()));
  CHECK(cluster.stop_daemon());
}

TEST_CASE("members already in stay in while strangers storm the daemon from their own address",
          "[integration][security]") {
  cohort::raise_fd_limit();
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  boost::asio::io_context io;
  Crowd members(io, cluster.port(), "members", 300);
  REQUIRE(run_until(
      io, [&] { return members.rounds() == 300 || members.lost() > 0; }, 60s));
  REQUIRE(members.lost() == 0);
  {
    SilentSiege siege(cluster.port(), 20, 60);
    SilentSiege neighbours(cluster.port(), 1, 400, 0);
    GarbageStorm garbage(cluster.port());
    for (int beat = 1; beat <= 16; ++beat) {  // 4 s of storm: past the strangers' 2 s grace
      members.heartbeat();
      run_until(
          io, [&] { return members.lost() > 0; }, 250ms);
    }
    run_until(
        io, [&] { return members.acks() == 300 * 16 || members.lost() > 0; }, 10s);
    CHECK(siege.reopened() > 0);
    CHECK(neighbours.reopened() > 0);
  }
  INFO(members.first_loss());
  CHECK(members.lost() == 0);
  CHECK(members.acks() == 300 * 16);
  CHECK(process_alive(cluster.daemon().pid()));
  CHECK(cluster.stop_daemon());
}
