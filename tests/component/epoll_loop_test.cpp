// EpollLoop on real sockets (AF_UNIX stream pairs: the same EAGAIN, short reads and edges as TCP):
// recvs and sends wait for their descriptor's next edge and no longer, a large send resumes when
// the peer reads, the end of a stream (with the last bytes, too) and a shutdown end the ops in
// flight, a released descriptor's number serves the next socket (and one handed elsewhere can
// come back), a socket kept full does not starve the others, and a destroyed io_context drops the
// owners it still holds.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/epoll_loop.hpp"

using namespace cohort;
using namespace std::chrono_literals;

namespace {

// A connected pair: `ours` (non-blocking, the loop's) and `peer` (blocking, the test's).
struct SocketPair {
  SocketPair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    ours = fds[0];
    peer = fds[1];
    REQUIRE(::fcntl(ours, F_SETFL, ::fcntl(ours, F_GETFL) | O_NONBLOCK) == 0);
  }
  ~SocketPair() {
    if (ours >= 0) ::close(ours);
    if (peer >= 0) ::close(peer);
  }
  void close_ours() {
    ::close(ours);
    ours = -1;
  }
  int ours = -1;
  int peer = -1;
};

// An op's owner: what its completions brought.
struct Owner {
  Owner() {
    op.complete = &Owner::completed;
    op.owner = this;
  }
  static void completed(void* self, int result) {
    auto& owner = *static_cast<Owner*>(self);
    owner.results.push_back(result);
    if (result > 0 && !owner.op.is_send) owner.bytes.append(owner.op.buffer, result);
    if (owner.then) owner.then(result);
  }
  SocketOp op;
  std::vector<int> results;
  std::string bytes;
  std::function<void(int)> then;
};

// Runs the context's handlers until `done` or 5 s.
bool run_until(boost::asio::io_context& io, const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(10ms);
  }
  return done();
}

void write_all(int descriptor, const std::string& bytes) {
  REQUIRE(::write(descriptor, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
}

}  // namespace

TEST_CASE("epoll loop: a recv waits for the next bytes and reads them into the loop's buffer",
          "[component][epoll_loop]") {
  boost::asio::io_context io;
  EpollLoop& loop = EpollLoop::of(io);
  SocketPair pair;
  auto owner = std::make_shared<Owner>();
  loop.receive(owner->op, owner, pair.ours, nullptr, 0);
  io.run_for(50ms);
  CHECK(owner->results.empty());  // nothing sent: it waits
  CHECK(owner->op.in_flight);

  write_all(pair.peer, "first");
  REQUIRE(run_until(io, [&] { return owner->results.size() == 1; }));
  CHECK(owner->bytes == "first");
  CHECK_FALSE(owner->op.in_flight);

  // The short read emptied the socket: the next recv waits for the next edge, then gets its bytes.
  loop.receive(owner->op, owner, pair.ours, nullptr, 0);
  io.restart();
  io.run_for(50ms);
  CHECK(owner->results.size() == 1);
  write_all(pair.peer, "second");
  REQUIRE(run_until(io, [&] { return owner->results.size() == 2; }));
  CHECK(owner->bytes == "firstsecond");
  CHECK(owner.use_count() == 1);  // the loop holds no owner between ops
  CHECK(loop.started() == 2);
}

TEST_CASE("epoll loop: a recv into a buffer of its own takes at most its size",
          "[component][epoll_loop]") {
  boost::asio::io_context io;
  EpollLoop& loop = EpollLoop::of(io);
  SocketPair pair;
  write_all(pair.peer, "0123456789");
  auto owner = std::make_shared<Owner>();
  char buffer[4];
  owner->then = [&](int result) {
    if (result > 0) loop.receive(owner->op, owner, pair.ours, buffer, sizeof buffer);
  };
  loop.receive(owner->op, owner, pair.ours, buffer, sizeof buffer);
  REQUIRE(run_until(io, [&] { return owner->bytes.size() == 10; }));
  CHECK(owner->results == std::vector<int>{4, 4, 2});
  CHECK(owner->bytes == "0123456789");
}

TEST_CASE("epoll loop: a send larger than the socket takes goes on when the peer reads",
          "[component][epoll_loop]") {
  boost::asio::io_context io;
  EpollLoop& loop = EpollLoop::of(io);
  SocketPair pair;
  std::string payload(4 << 20, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7);
  size_t sent = 0;
  auto owner = std::make_shared<Owner>();
  owner->then = [&](int result) {
    if (result <= 0) return;
    sent += static_cast<size_t>(result);
    if (sent < payload.size()) {
      loop.send(owner->op, owner, pair.ours, payload.data() + sent, payload.size() - sent);
    }
  };
  loop.send(owner->op, owner, pair.ours, payload.data(), payload.size());
  REQUIRE(run_until(io, [&] { return !owner->results.empty(); }));
  REQUIRE(sent < payload.size());  // the socket's buffer took only part of it
  io.restart();
  io.run_for(50ms);
  size_t waiting_at = owner->results.size();
  CHECK(owner->op.in_flight);  // the rest waits for room, without spinning
  CHECK(owner->results.size() == waiting_at);

  std::string received;
  std::thread reader([&] {
    std::vector<char> chunk(64 * 1024);
    while (received.size() < payload.size()) {
      ssize_t got = ::read(pair.peer, chunk.data(), chunk.size());
      if (got <= 0) break;
      received.append(chunk.data(), static_cast<size_t>(got));
    }
  });
  bool all_sent = run_until(io, [&] { return sent == payload.size(); });
  reader.join();
  CHECK(all_sent);
  CHECK(received == payload);
}

TEST_CASE("epoll loop: the end of the stream and a shutdown end the ops in flight",
          "[component][epoll_loop]") {
  boost::asio::io_context io;
  EpollLoop& loop = EpollLoop::of(io);
  {
    SocketPair pair;
    auto owner = std::make_shared<Owner>();
    loop.receive(owner->op, owner, pair.ours, nullptr, 0);
    ::close(pair.peer);
    pair.peer = -1;
    REQUIRE(run_until(io, [&] { return !owner->results.empty(); }));
    CHECK(owner->results == std::vector<int>{0});
    loop.release(pair.ours, true);
  }
  {
    SocketPair pair;
    auto owner = std::make_shared<Owner>();
    loop.receive(owner->op, owner, pair.ours, nullptr, 0);
    io.restart();
    io.run_for(20ms);
    ::shutdown(pair.ours, SHUT_RDWR);  // what a session does to end its ops before it closes
    REQUIRE(run_until(io, [&] { return !owner->results.empty(); }));
    CHECK(owner->results == std::vector<int>{0});
    CHECK(owner.use_count() == 1);
    loop.release(pair.ours, true);
  }
}

TEST_CASE("epoll loop: the end of a stream that came with the last bytes is not lost",
          "[component][epoll_loop]") {
  boost::asio::io_context io;
  EpollLoop& loop = EpollLoop::of(io);
  SocketPair pair;
  auto owner = std::make_shared<Owner>();
  owner->then = [&](int result) {
    if (result > 0) loop.receive(owner->op, owner, pair.ours, nullptr, 0);
  };
  loop.receive(owner->op, owner, pair.ours, nullptr, 0);
  io.run_for(20ms);  // nothing yet: the recv waits for an edge
  REQUIRE(owner->results.empty());
  // The last bytes and the end of the stream arrive together: one edge for both. The recv that
  // takes the bytes is short, yet the socket is still readable (its end), and no edge will follow.
  write_all(pair.peer, "last");
  ::shutdown(pair.peer, SHUT_WR);
  REQUIRE(run_until(io, [&] { return owner->results.size() == 2; }));
  CHECK(owner->results == std::vector<int>{4, 0});
  CHECK(owner->bytes == "last");
}

TEST_CASE("epoll loop: a released descriptor's number serves the next socket",
          "[component][epoll_loop]") {
  boost::asio::io_context io;
  EpollLoop& loop = EpollLoop::of(io);
  auto first = std::make_unique<SocketPair>();
  auto owner = std::make_shared<Owner>();
  write_all(first->peer, "a");
  loop.receive(owner->op, owner, first->ours, nullptr, 0);
  REQUIRE(run_until(io, [&] { return owner->results.size() == 1; }));
  int number = first->ours;
  loop.release(number, true);
  first.reset();

  SocketPair second;  // the kernel gives the lowest free numbers: the same ones
  REQUIRE(second.ours == number);
  loop.receive(owner->op, owner, second.ours, nullptr, 0);
  io.restart();
  io.run_for(20ms);
  CHECK(owner->results.size() == 1);
  write_all(second.peer, "b");
  REQUIRE(run_until(io, [&] { return owner->results.size() == 2; }));
  CHECK(owner->bytes == "ab");

  // Handed elsewhere (not closed) and back: taken out of the set, so it can be registered again.
  loop.release(second.ours, false);
  write_all(second.peer, "c");
  loop.receive(owner->op, owner, second.ours, nullptr, 0);
  REQUIRE(run_until(io, [&] { return owner->results.size() == 3; }));
  CHECK(owner->results[2] == 1);
  CHECK(owner->bytes == "abc");
}

TEST_CASE("epoll loop: a socket kept full cannot hold the thread from the others",
          "[component][epoll_loop]") {
  boost::asio::io_context io;
  EpollLoop& loop = EpollLoop::of(io);
  SocketPair busy;
  SocketPair quiet;
  write_all(busy.peer, std::string(EpollLoop::kReadBytes * 3, 'x'));
  write_all(quiet.peer, "q");
  auto flood = std::make_shared<Owner>();
  auto other = std::make_shared<Owner>();
  size_t flood_reads_before_other = 0;
  flood->then = [&](int result) {
    if (result > 0) loop.receive(flood->op, flood, busy.ours, nullptr, 0);
  };
  other->then = [&](int) { flood_reads_before_other = flood->results.size(); };
  loop.receive(flood->op, flood, busy.ours, nullptr, 0);
  loop.receive(other->op, other, quiet.ours, nullptr, 0);
  REQUIRE(run_until(io, [&] {
    return other->results.size() == 1 && flood->bytes.size() >= EpollLoop::kReadBytes * 3;
  }));
  CHECK(flood_reads_before_other <= 1);
  CHECK(other->bytes == "q");
}

TEST_CASE("epoll loop: a destroyed io_context drops the owners of the ops still waiting",
          "[component][epoll_loop]") {
  SocketPair pair;
  std::weak_ptr<Owner> watched;
  {
    boost::asio::io_context io;
    EpollLoop& loop = EpollLoop::of(io);
    auto owner = std::make_shared<Owner>();
    watched = owner;
    loop.receive(owner->op, owner, pair.ours, nullptr, 0);
    owner.reset();
    io.run_for(20ms);
    CHECK_FALSE(watched.expired());  // the waiting recv holds it
  }
  CHECK(watched.expired());
}
