// `cohort run` pointed at an endpoint where no cohort rendezvous answers. Each way ends with exit 3
// and a message naming the endpoint and the cause: a service that speaks something else (an sshd's
// banner, the daemon's HTTP port) at once; a worker store, a silent service, a name that does not
// resolve and a port where nothing listens once the join timeout has passed (counted once, however
// often the agent tried again), saying so within a second or two and then every ten seconds.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <list>
#include <thread>

#include "common/free_port.hpp"

#include "tests/integration/integration_support.hpp"

using namespace cohort::test;
namespace ip = boost::asio::ip;

namespace {

// A listener on 127.0.0.1 that accepts every connection, writes `greeting` (if any) and then
// holds the connection open without a word; on its own thread until destroyed.
class ForeignService {
 public:
  explicit ForeignService(std::string greeting)
      : greeting_(std::move(greeting)),
        acceptor_(io_, ip::tcp::endpoint(ip::make_address("127.0.0.1"), 0)) {
    accept_next();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~ForeignService() {
    io_.stop();
    thread_.join();
  }
  std::string endpoint() const {
    return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }

 private:
  void accept_next() {
    acceptor_.async_accept([this](const boost::system::error_code& error, ip::tcp::socket socket) {
      if (error) return;
      boost::system::error_code ignored;
      if (!greeting_.empty()) boost::asio::write(socket, boost::asio::buffer(greeting_), ignored);
      held_.push_back(std::move(socket));
      accept_next();
    });
  }

  std::string greeting_;
  boost::asio::io_context io_;
  ip::tcp::acceptor acceptor_;
  std::list<ip::tcp::socket> held_;
  std::thread thread_;
};

std::vector<std::string> run_against(const std::string& endpoint, int join_timeout = 3) {
  return {"--rdzv-backend",
          "c10d",
          "--rdzv-endpoint",
          endpoint,
          "--rdzv-id",
          "x",
          "--rdzv-conf",
          "is_host=false,heartbeat_timeout=1,keep_alive_interval=0.2,join_timeout=" +
              std::to_string(join_timeout),
          "--no-python",
          kTestWorkerBin,
          "--exit-code",
          "0"};
}

struct TimedRun {
  RunResult result;
  std::chrono::milliseconds took;
};

TimedRun timed_run(Scratch& scratch, const std::vector<std::string>& args) {
  auto started = std::chrono::steady_clock::now();
  RunResult result = scratch.run(args, {}, 60s);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  return {std::move(result), took};
}

// Ended by the join timeout: not before it, and not long after.
void check_ended_at_join_timeout(const TimedRun& run, std::chrono::seconds join_timeout) {
  INFO(run.result.err);
  CHECK(run.result.status.shell_code() == 3);
  CHECK(run.took >= join_timeout - 500ms);
  CHECK(run.took < join_timeout + 3s);
}

}  // namespace

TEST_CASE("an endpoint that speaks another protocol ends the run at once with exit 3",
          "[integration][run][endpoint]") {
  Scratch scratch;
  ForeignService sshd("SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n");
  RunResult result = scratch.run(run_against(sshd.endpoint()), {}, 30s);
  INFO(result.err);
  CHECK(result.status.shell_code() == 3);
  CHECK(contains(result.err, sshd.endpoint() +
                                 " is not a cohort rendezvous: the first bytes it sent were not a "
                                 "cohort frame"));
  CHECK(contains(result.err, "--tcpstore-port"));
  CHECK_FALSE(contains(result.err, "reconnecting"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("an endpoint that accepts and stays silent ends the run after the join timeout",
          "[integration][run][endpoint]") {
  Scratch scratch;
  ForeignService silent("");
  TimedRun run = timed_run(scratch, run_against(silent.endpoint()));
  check_ended_at_join_timeout(run, 3s);
  CHECK(contains(run.result.err, "cannot reach the rendezvous at " + silent.endpoint() +
                                     ": it accepted the connection but never answered as a "
                                     "cohort rendezvous"));
  CHECK_FALSE(contains(run.result.err, "reconnecting"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("a worker store named as the endpoint ends the run after the join timeout, named",
          "[integration][run][endpoint]") {
  Scratch scratch;
  {
    std::string store;
    auto daemon = scratch.start_tcpstore_daemon(store);
    TimedRun run = timed_run(scratch, run_against(store));
    check_ended_at_join_timeout(run, 3s);
    CHECK(contains(run.result.err, "cannot reach the rendezvous at " + store +
                                       " (it closed the connection without answering as a "
                                       "cohort rendezvous"));
    CHECK(contains(run.result.err, "not a worker store (--tcpstore-port)"));
  }
  CHECK(scratch.nothing_left());
}

TEST_CASE("a name that does not resolve is said at once, then every ten seconds, until the end",
          "[integration][run][endpoint]") {
  Scratch scratch;
  TimedRun run = timed_run(scratch, run_against("no-such-host.invalid:29400", 12));
  check_ended_at_join_timeout(run, 12s);
  CHECK(contains(run.result.err,
                 "cannot reach the rendezvous at no-such-host.invalid:29400 (Host not found"));
  CHECK(contains(run.result.err, "giving up in 12s (join_timeout)"));
  CHECK(contains(run.result.err, "still trying no-such-host.invalid:29400 (Host not found"));
  CHECK(contains(run.result.err,
                 "cohort error: cannot reach the rendezvous at "
                 "no-such-host.invalid:29400: Host not found"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("a port where nothing listens ends the run after the join timeout",
          "[integration][run][endpoint]") {
  Scratch scratch;
  std::string nobody = "127.0.0.1:" + std::to_string(cohort::pick_free_port("127.0.0.1"));
  TimedRun run = timed_run(scratch, run_against(nobody));
  check_ended_at_join_timeout(run, 3s);
  CHECK(contains(run.result.err, "cannot reach the rendezvous at " + nobody +
                                     " (Connection refused); trying again, giving up in"));
  CHECK(contains(run.result.err, "cohort error: cannot reach the rendezvous at " + nobody +
                                     ": Connection refused"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("static mode with nobody at the master address ends after the join timeout",
          "[integration][run][endpoint]") {
  Scratch scratch;
  int port = cohort::pick_free_port("127.0.0.1");
  TimedRun run =
      timed_run(scratch, {"--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1",
                          "--master-port", std::to_string(port), "--rdzv-conf", "join_timeout=3",
                          "--no-python", kTestWorkerBin, "--exit-code", "0"});
  check_ended_at_join_timeout(run, 3s);
  CHECK(contains(run.result.err, "cannot reach the rendezvous at 127.0.0.1:" +
                                     std::to_string(port) + ": Connection refused"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("the daemon's HTTP port named as the endpoint ends the run at once, said so",
          "[integration][run][endpoint]") {
  Scratch scratch;
  std::string http_file = scratch.file("http_port");
  ChildOptions daemon_options = scratch.options();
  daemon_options.name = "cohortd";
  ChildProcess daemon({kCohortdBin, "--host", "127.0.0.1", "--port", "0", "--http-port", "0",
                       "--http-port-file", http_file},
                      daemon_options);
  REQUIRE(wait_until([&] { return file_exists(http_file); }, 10s));
  std::string http = "127.0.0.1:" + std::to_string(std::atoi(read_file(http_file).c_str()));
  // A join timeout far beyond the test's own: only "at once" passes.
  RunResult result = scratch.run(run_against(http, 600), {}, 30s);
  INFO(result.err);
  CHECK(result.status.shell_code() == 3);
  CHECK(contains(result.err, http + " is not a cohort rendezvous"));
  CHECK(contains(result.err, "it answers HTTP: is it a daemon's --http-port?"));
  CHECK_FALSE(contains(result.err, "trying again"));

  // cohort status and stop wait a second for a challenge, then ask as HTTP would: they used to
  // wait their whole 5 s and say only that no answer came.
  for (const char* command : {"status", "stop"}) {
    auto start = std::chrono::steady_clock::now();
    RunResult tool = run_to_end({kCohortBin, command, "--rdzv-endpoint", http, "--rdzv-id", "job"},
                                scratch.options(), 20s);
    auto took = std::chrono::steady_clock::now() - start;
    INFO(command << ": " << tool.err);
    CHECK(tool.status.shell_code() == 3);
    CHECK(contains(tool.err,
                   "it answers HTTP: is it a daemon's --http-port? (--rdzv-endpoint "
                   "names cohortd's control port, its --port, 29400 by default)"));
    CHECK(took < 4s);
  }
}

TEST_CASE("an agent that hosts the rendezvous at an endpoint where nothing listened says so once",
          "[integration][run][endpoint]") {
  Scratch scratch;
  std::string endpoint = "127.0.0.1:" + std::to_string(cohort::pick_free_port("127.0.0.1"));
  RunResult result = scratch.run(
      {"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "x",
       "--rdzv-conf", "join_timeout=2", "--no-python", kTestWorkerBin, "--exit-code", "0"},
      {}, 30s);
  INFO(result.err);
  CHECK(result.status.shell_code() == 3);  // nobody else came
  std::string said = "nothing listened at " + endpoint +
                     " (--rdzv-endpoint), so this node now hosts the rendezvous there: the other "
                     "nodes must reach it at " +
                     endpoint;
  CHECK(contains(result.err, said));
  CHECK(result.err.find(said) == result.err.rfind(said));  // once
  CHECK(scratch.nothing_left());
}
