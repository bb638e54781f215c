// A stranger on the network against the real daemons: cohortd, and an agent that hosts the
// rendezvous itself. Whatever one connection sends, the process survives, its runs go on and the
// next client is served.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <csignal>
#include <fstream>
#include <thread>

#include "proto/control_frame.hpp"
#include "proto/control_messages.hpp"
#include "tests/integration/multinode_support.hpp"
#include "tests/integration/siege_support.hpp"

using namespace cohort::test;
namespace ip = boost::asio::ip;

namespace {

// Sends `bytes` on a fresh connection to 127.0.0.1:port and reads until the peer closes (or 5 s
// pass); true when the peer closed the connection.
bool send_and_expect_close(int port, const std::string& bytes) {
  boost::asio::io_context io;
  ip::tcp::socket socket(io);
  socket.connect(ip::tcp::endpoint(ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
  timeval timeout{5, 0};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  boost::system::error_code error;
  boost::asio::write(socket, boost::asio::buffer(bytes), error);
  char buffer[4096];
  while (!error) socket.read_some(boost::asio::buffer(buffer), error);
  return error == boost::asio::error::eof || error == boost::asio::error::connection_reset;
}

// 40 KB of JSON arrays nested 20,000 deep: one frame that used to overflow the daemon's stack.
std::string deep_frame() {
  return cohort::proto::encode_frame(std::string(20000, '[') + std::string(20000, ']'));
}

// A connection from `from` to 127.0.0.1:port that sends `bytes` and then nothing more.
std::unique_ptr<ip::tcp::socket> stalled_connection(boost::asio::io_context& io, const char* from,
                                                    int port, const std::string& bytes) {
  auto socket = std::make_unique<ip::tcp::socket>(io, ip::tcp::endpoint(ip::make_address(from), 0));
  socket->connect(ip::tcp::endpoint(ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
  boost::system::error_code refused;  // past the cap the daemon may close it while we write
  boost::asio::write(*socket, boost::asio::buffer(bytes), refused);
  return socket;
}

// Reads (discarding) until the peer closes, for at most `limit`; true when it closed.
bool closed_by_peer(ip::tcp::socket& socket, std::chrono::seconds limit) {
  timeval timeout{static_cast<time_t>(limit.count()), 0};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  char buffer[4096];
  boost::system::error_code error;
  while (!error) socket.read_some(boost::asio::buffer(buffer), error);
  return error == boost::asio::error::eof || error == boost::asio::error::connection_reset;
}

long resident_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

}  // namespace

TEST_CASE("18 addresses x 60 silent strangers lock out neither a token holder nor a new run",
          "[integration][security]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.use_token();
  cluster.start_daemon();
  SilentSiege siege(cluster.port(), 18, 60);  // 1,080 strangers: over the 1,024 cap
  std::this_thread::sleep_for(500ms);
  int answered = 0;
  for (int i = 0; i < 10; ++i) {
    RunResult status = run_to_end({kCohortBin, "status", "--rdzv-endpoint", cluster.endpoint(),
                                   "--json", "--token-file", cluster.token_file()},
                                  scratch.options(), 20s);
    INFO(status.err);
    answered += status.status.success() ? 1 : 0;
  }
  CHECK(answered == 10);
  auto node =
      cluster.node("127.0.0.2", {"--nnodes", "1", "--rdzv-id", "besieged"}, {"--exit-code", "0"});
  auto exit = node->wait(60s);
  INFO(node->output() << cluster.daemon().err());
  REQUIRE(exit);
  CHECK(exit->success());
  CHECK(siege.reopened() > 0);  // the siege went on: strangers were evicted and came back
  CHECK(process_alive(cluster.daemon().pid()));
  CHECK(cluster.stop_daemon());
}

TEST_CASE("slow strangers are capped and timed out while a real run completes",
          "[integration][security]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  boost::asio::io_context io;
  // Each stranger announces a 64 KiB frame and sends all of it but the last byte.
  std::string partial =
      cohort::proto::encode_frame(std::string(cohort::proto::kMaxFirstFrameBytes, 'x'));
  partial.pop_back();
  std::vector<std::unique_ptr<ip::tcp::socket>> strangers;
  for (const char* from : {"127.0.0.5", "127.0.0.6"}) {
    for (int i = 0; i < 100; ++i)
      strangers.push_back(stalled_connection(io, from, cluster.port(), partial));
  }
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (const char* address : {"127.0.0.2", "127.0.0.3"}) {
    nodes.push_back(cluster.node(address, {"--nnodes", "2", "--rdzv-id", "busy"},
                                 {"--sleep-ms", "500", "--exit-code", "0"}));
  }
  for (auto& node : nodes) {
    auto exit = node->wait(30s);
    INFO(node->output());
    REQUIRE(exit);
    CHECK(exit->success());
  }
  CHECK(resident_kib(cluster.daemon().pid()) < 200 * 1024);
  size_t closed = 0;
  for (auto& stranger : strangers) closed += closed_by_peer(*stranger, 15s) ? 1 : 0;
  // Past the per-address cap they wait their turn unread, and speaking before their challenge
  // are closed at once; the rest at the timeout.
  CHECK(closed == strangers.size());
  CHECK(contains(cluster.daemon().err(),
                 "closing a connection from 127.0.0.5 that waits its turn: it spoke before its "
                 "challenge"));
  CHECK(contains(cluster.daemon().err(), "no hello within the hello timeout"));
  CHECK(daemon_status(cluster.endpoint()).runs.empty());
  CHECK(cluster.stop_daemon());
}

TEST_CASE("a frame nested 20,000 deep leaves cohortd and its runs alive",
          "[integration][security]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  auto node = cluster.node("127.0.0.2", {"--nnodes", "1", "--rdzv-id", "victim"},
                           {"--pid-file", scratch.file("pid_{RANK}"), "--hang"});
  REQUIRE(wait_until([&] { return file_exists(scratch.file("pid_0")); }, 20s));
  CHECK(send_and_expect_close(cluster.port(), deep_frame()));
  CHECK(process_alive(cluster.daemon().pid()));
  auto status = daemon_status(cluster.endpoint());
  REQUIRE(status.runs.size() == 1);
  CHECK(status.runs[0].run_id == "victim");
  CHECK(status.runs[0].phase == "running");
  CHECK(process_alive(read_pid(scratch.file("pid_0"))));
  node->signal(SIGTERM);
  auto exit = node->wait(10s);
  REQUIRE(exit);
  CHECK(*exit == cohort::ExitStatus::exited(128 + SIGTERM));
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

TEST_CASE("a frame nested 20,000 deep leaves an agent that hosts the rendezvous alive",
          "[integration][security]") {
  Scratch scratch;
  int port = free_daemon_port(scratch);
  auto agent =
      scratch.start({"--nnodes", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                     "127.0.0.1:" + std::to_string(port), "--rdzv-id", "hosted", "--no-python",
                     kTestWorkerBin, "--pid-file", scratch.file("pid_{RANK}"), "--hang"});
  REQUIRE(wait_until([&] { return file_exists(scratch.file("pid_0")); }, 20s));
  CHECK(send_and_expect_close(port, deep_frame()));
  CHECK(process_alive(agent->pid()));
  CHECK(process_alive(read_pid(scratch.file("pid_0"))));
  auto status = daemon_status("127.0.0.1:" + std::to_string(port));
  REQUIRE(status.runs.size() == 1);
  CHECK(status.runs[0].run_id == "hosted");
  agent->signal(SIGTERM);
  auto exit = agent->wait(10s);
  INFO(agent->output());
  REQUIRE(exit);
  CHECK(*exit == cohort::ExitStatus::exited(128 + SIGTERM));
  CHECK(scratch.nothing_left());
}

TEST_CASE("cohortd without a token listens on loopback only, beyond it needs --insecure",
          "[integration][security][auth]") {
  Scratch scratch;
  RunResult refused =
      scratch.run_argv({kCohortdBin, "--host", "0.0.0.0", "--port", "0"}, scratch.options(), 10s);
  CHECK(refused.status == cohort::ExitStatus::exited(2));
  CHECK(contains(refused.err, "--host 0.0.0.0: without a token"));
  ChildOptions options = scratch.options();
  options.name = "cohortd_default";
  ChildProcess daemon({kCohortdBin, "--port", "0", "--port-file", scratch.file("port")}, options);
  REQUIRE(wait_until([&] { return file_exists(scratch.file("port")); }, 10s));
  CHECK(contains(daemon.err(), "listening on 127.0.0.1 only"));
  CHECK(contains(daemon.out(), "cohortd: listening on 127.0.0.1:"));
  daemon.signal(SIGTERM);
  CHECK(daemon.wait(10s));
}

TEST_CASE(
    "a run on a daemon with a token: members prove it, strangers and changed answers are refused",
    "[integration][security][auth]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.use_token();
  cluster.start_daemon("0.0.0.0");  // allowed: it has a token
  std::vector<std::string> flags{"--nnodes", "2", "--nproc-per-node", "1", "--rdzv-id", "secret"};
  auto a = cluster.node("127.0.0.2", flags, {"--pid-file", scratch.file("pid_{RANK}"), "--hang"});
  auto b = cluster.node("127.0.0.3", flags, {"--pid-file", scratch.file("pid_{RANK}"), "--hang"});
  REQUIRE(wait_until([&] { return file_exists(scratch.file("pid_1")); }, 20s));
  auto status = daemon_status(cluster.endpoint(), cluster.token_file());
  REQUIRE(status.runs.size() == 1);
  CHECK(status.runs[0].phase == "running");

  // No token: the agent exits 3 naming what is missing; status is refused the same way.
  RunResult stranger =
      scratch.run({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", cluster.endpoint(),
                   "--rdzv-id", "secret", "--local-addr", "127.0.0.4", "--no-python", "/bin/true"},
                  {}, 20s);
  CHECK(stranger.status == cohort::ExitStatus::exited(3));
  CHECK(contains(stranger.err, "this rendezvous needs a token"));
  RunResult snoop = scratch.run_argv({kCohortBin, "status", "--rdzv-endpoint", cluster.endpoint()},
                                     scratch.options(), 10s);
  CHECK(snoop.status == cohort::ExitStatus::exited(3));
  CHECK(contains(snoop.err, "authentication failed"));
  CHECK(process_alive(read_pid(scratch.file("pid_0"))));

  // A relay that changes the daemon's answers on the way: the tool with the token refuses them,
  // though the proof inside is the daemon's own; a stop through it still says what it did.
  std::string relay_port = scratch.file("relay_port");
  cohort::test::ChildProcess relay(
      {kPython, std::string(kSourceDir) + "/tests/integration/answer_relay.py", "127.0.0.1",
       std::to_string(cluster.port()), "\"phase\":\"running\"", "\"phase\":\"stopped\"", "60",
       relay_port},
      scratch.options());
  REQUIRE(wait_until([&] { return file_exists(relay_port); }, 10s));
  std::string relayed = "127.0.0.1:" + read_file(relay_port);
  RunResult changed = scratch.run_argv(
      {kCohortBin, "status", "--rdzv-endpoint", relayed, "--token-file", cluster.token_file()},
      scratch.options(), 10s);
  INFO(changed.out << changed.err);
  CHECK(changed.status == cohort::ExitStatus::exited(3));
  CHECK(contains(changed.err, "or it was changed on the way"));
  CHECK_FALSE(contains(changed.out, "stopped"));
  RunResult straight = scratch.run_argv({kCohortBin, "status", "--rdzv-endpoint",
                                         cluster.endpoint(), "--token-file", cluster.token_file()},
                                        scratch.options(), 10s);
  CHECK(straight.status.success());
  CHECK(contains(straight.out, "run secret: running"));
  relay.signal(SIGKILL);
  relay.wait(5s);

  for (auto* node : {a.get(), b.get()}) node->signal(SIGTERM);
  for (auto* node : {a.get(), b.get()}) CHECK(node->wait(10s));
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

TEST_CASE("an agent does not host a rendezvous other hosts reach without a token",
          "[integration][security][auth]") {
  Scratch scratch;
  char name[256] = {};
  REQUIRE(::gethostname(name, sizeof name - 1) == 0);
  RunResult result = scratch.run(
      {"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", std::string(name) + ":29999",
       "--rdzv-conf", "is_host=true", "--no-python", "/bin/true"},
      {}, 20s);
  INFO(result.err);
  CHECK(result.status == cohort::ExitStatus::exited(2));  // a usage error, found before joining
  CHECK(contains(result.err, "without a token anyone who reaches it"));
}

TEST_CASE("control characters a worker writes reach the failure summary escaped",
          "[integration][security]") {
  Scratch scratch;
  RunResult result =
      scratch.run({"--standalone", "--no-python", "/bin/sh", "-c",
                   "printf 'clear \\033[2J title \\033]0;owned\\007 bell\\n' >&2; exit 5"});
  CHECK(result.status == cohort::ExitStatus::exited(5));
  std::string summary = failure_summary(result.err);
  INFO(summary);
  CHECK(contains(summary, "clear \\x1b[2J title \\x1b]0;owned\\x07 bell"));
  CHECK_FALSE(contains(summary, "\x1b"));
}

namespace {

// User + system CPU time of a process, in clock ticks (/proc/PID/stat fields 14 and 15).
long cpu_ticks(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int index = 3; fields >> field; ++index) {
    if (index == 14) utime = std::stol(field);
    if (index == 15) stime = std::stol(field);
  }
  return utime + stime;
}

}  // namespace

TEST_CASE(
    "cohortd out of descriptors refuses the excess at once and says so once then serves again",
    "[integration][security][fd-limit]") {
  Scratch scratch;
  ChildOptions options = scratch.options();
  options.name = "cohortd_fd";
  // A hard limit of 24 descriptors: a few dozen connections exhaust it.
  ChildProcess daemon({"/usr/bin/prlimit", "--nofile=24:24", kCohortdBin, "--port", "0",
                       "--port-file", scratch.file("port")},
                      options);
  REQUIRE(wait_until([&] { return file_exists(scratch.file("port")); }, 10s));
  int port = std::atoi(read_file(scratch.file("port")).c_str());
  boost::asio::io_context io;
  std::vector<std::unique_ptr<ip::tcp::socket>> flood;
  for (int i = 0; i < 40; ++i) {
    auto socket = std::make_unique<ip::tcp::socket>(io);
    boost::system::error_code error;
    socket->connect(ip::tcp::endpoint(ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)),
                    error);
    if (!error) flood.push_back(std::move(socket));
  }
  long before = cpu_ticks(daemon.pid());
  std::this_thread::sleep_for(1500ms);
  long used = cpu_ticks(daemon.pid()) - before;
  CHECK(used < 30);  // a spinning acceptor burns ~150 ticks in 1.5 s
  // Those past the limit were closed at once (end of stream), not left in the listen queue; those
  // let in were sent the challenge.
  int refused = 0, challenged = 0;
  for (auto& socket : flood) {
    socket->non_blocking(true);
    char byte = 0;
    boost::system::error_code error;
    size_t got = socket->read_some(boost::asio::buffer(&byte, 1), error);
    refused += error == boost::asio::error::eof || error == boost::asio::error::connection_reset;
    challenged += got == 1;
  }
  CHECK(refused >= 10);
  CHECK(challenged >= 1);
  CHECK(refused + challenged == static_cast<int>(flood.size()));
  std::string err = daemon.err();
  INFO(err);
  int lines = 0;
  for (const auto& line : split_lines(err)) lines += contains(line, "out of file descriptors");
  CHECK(lines == 1);  // once for the whole shortage
  CHECK(contains(err, "the open-file limit is 24; raise it with `ulimit -n`"));
  CHECK(contains(err, "LimitNOFILE="));
  CHECK_FALSE(contains(err, "accept failed"));
  flood.clear();  // descriptors come free: the daemon answers again
  CHECK(wait_until(
      [&] {
        return run_to_end(
                   {kCohortBin, "status", "--rdzv-endpoint", "127.0.0.1:" + std::to_string(port)},
                   scratch.options(), 10s)
            .status.success();
      },
      10s));
  CHECK(contains(daemon.err(), "rendezvous: accepting connections again;"));
  daemon.signal(SIGTERM);
  CHECK(daemon.wait(10s));
}

// A line break in a node's id or reason split the daemon's log line, so the rest of it read as a
// line of the daemon's own (other control bytes were already escaped).
TEST_CASE("a node id and a reason with line breaks stay on their line of cohortd's log",
          "[integration][security]") {
  Scratch scratch;
  ChildOptions options = scratch.options();
  options.name = "cohortd_log";
  ChildProcess daemon({kCohortdBin, "--port", "0", "--port-file", scratch.file("port")}, options);
  REQUIRE(wait_until([&] { return file_exists(scratch.file("port")); }, 10s));
  int port = std::atoi(read_file(scratch.file("port")).c_str());
  cohort::proto::Hello hello;
  hello.run_id = "job";
  hello.node_id = "n1\ncohortd: forged by the node id\r";
  hello.address = "127.0.0.1";
  hello.config = {2, 2, 0, 100, 5000, 5000};
  hello.unhealthy = "sick\r\ncohortd: forged by the reason";
  boost::asio::io_context io;
  ip::tcp::socket socket(io);
  socket.connect(ip::tcp::endpoint(ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
  std::string frame = cohort::proto::encode_frame(cohort::proto::encode_message(hello));
  boost::asio::write(socket, boost::asio::buffer(frame));
  REQUIRE(wait_until([&] { return contains(daemon.err(), "is unhealthy"); }, 10s));
  std::string err = daemon.err();
  INFO(err);
  for (const auto& line : split_lines(err)) CHECK_FALSE(contains(line.substr(0, 20), "forged"));
  CHECK(contains(err,
                 "node n1\\ncohortd: forged by the node id\\r of run job is unhealthy: "
                 "sick\\r\\ncohortd: forged by the reason"));
}
