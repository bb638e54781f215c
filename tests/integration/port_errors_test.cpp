// A port that cannot be listened on is named with its flag: the HTTP port of cohortd and of a
// standalone cohort run, held busy by the test, is the one the error names, not the control
// port. Real cohort and cohortd binaries.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>

#include "tests/integration/integration_support.hpp"

using namespace cohort::test;
namespace ip = boost::asio::ip;

namespace {

// A listening socket on 127.0.0.1 at a free port, held for the test's lifetime.
struct BusyPort {
  boost::asio::io_context io;
  ip::tcp::acceptor acceptor{io, ip::tcp::endpoint(ip::make_address("127.0.0.1"), 0)};
  std::string port() const { return std::to_string(acceptor.local_endpoint().port()); }
};

}  // namespace

TEST_CASE("cohortd names the busy --http-port, not the control port", "[integration][ports]") {
  Scratch scratch;
  BusyPort busy;
  RunResult result = scratch.run_argv(
      {kCohortdBin, "--host", "127.0.0.1", "--port", "0", "--http-port", busy.port()},
      scratch.options(), 30s);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() != 0);
  CHECK(contains(result.err, "cohortd: --http-port " + busy.port() +
                                 ": cannot listen on 127.0.0.1:" + busy.port() + ": "));
  CHECK_FALSE(contains(result.err, "127.0.0.1:0"));
}

TEST_CASE("cohort run --standalone names the busy --http-port", "[integration][ports]") {
  Scratch scratch;
  BusyPort busy;
  RunResult result = scratch.run({"--standalone", "--http-port", busy.port(), "--no-python",
                                  kTestWorkerBin, "--exit-code", "0"},
                                 {}, 30s);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 3);
  CHECK(contains(result.err, "cohort run: --http-port " + busy.port() +
                                 ": cannot listen on 127.0.0.1:" + busy.port() + ": "));
  CHECK_FALSE(contains(result.err, "cannot host the rendezvous on 127.0.0.1:0"));
  CHECK(scratch.nothing_left());
}
