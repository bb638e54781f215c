// `cohort run` pointed at an endpoint where no cohort rendezvous answers: a service that speaks
// something else (an sshd's banner) ends the run at once with exit 3, and one that accepts and
// stays silent ends it once the join timeout has passed, however often the agent reconnected.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <list>
#include <thread>

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

std::vector<std::string> run_against(const std::string& endpoint) {
  return {"--rdzv-backend",  "c10d",
          "--rdzv-endpoint", endpoint,
          "--rdzv-id",       "x",
          "--rdzv-conf",     "join_timeout=3,heartbeat_timeout=1,keep_alive_interval=0.2",
          "--no-python",     kTestWorkerBin,
          "--exit-code",     "0"};
}

}  // namespace

TEST_CASE("an endpoint that speaks another protocol ends the run at once with exit 3",
          "[integration][run][endpoint]") {
  Scratch scratch;
  ForeignService sshd("SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n");
  RunResult result = scratch.run(run_against(sshd.endpoint()), {}, 30s);
  INFO(result.err);
  CHECK(result.status.shell_code() == 3);
  CHECK(contains(result.err, sshd.endpoint() + " is not a cohort rendezvous"));
  CHECK(contains(result.err, "--tcpstore-port"));
  CHECK_FALSE(contains(result.err, "reconnecting"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("an endpoint that accepts and stays silent ends the run after the join timeout",
          "[integration][run][endpoint]") {
  Scratch scratch;
  ForeignService silent("");
  RunResult result = scratch.run(run_against(silent.endpoint()), {}, 30s);
  INFO(result.err);
  CHECK(result.status.shell_code() == 3);
  CHECK(contains(result.err, "never answered as a cohort rendezvous"));
  CHECK(scratch.nothing_left());
}
