#include "common/accept_backoff.hpp"

#include <boost/asio/error.hpp>
#include <catch2/catch.hpp>

using namespace cohort;
using namespace std::chrono_literals;

TEST_CASE("accept backoff doubles from 100 ms to 1 s and resets after an accept",
          "[unit][common]") {
  AcceptBackoff backoff;
  CHECK(backoff.next_delay() == 100ms);
  CHECK(backoff.next_delay() == 200ms);
  CHECK(backoff.next_delay() == 400ms);
  CHECK(backoff.next_delay() == 800ms);
  CHECK(backoff.next_delay() == 1000ms);
  CHECK(backoff.next_delay() == 1000ms);
  backoff.reset();
  CHECK(backoff.next_delay() == 100ms);
}

TEST_CASE("accept backoff allows one log line a second", "[unit][common]") {
  AcceptBackoff backoff;
  std::chrono::steady_clock::time_point start{};
  CHECK(backoff.time_to_log(start));
  CHECK_FALSE(backoff.time_to_log(start + 999ms));
  CHECK(backoff.time_to_log(start + 1000ms));
  CHECK_FALSE(backoff.time_to_log(start + 1500ms));
}

TEST_CASE("only shortages of descriptors or memory are waited out", "[unit][common]") {
  CHECK(AcceptBackoff::is_shortage(boost::asio::error::no_descriptors));
  CHECK(AcceptBackoff::is_shortage(
      boost::system::error_code(ENFILE, boost::system::system_category())));
  CHECK(AcceptBackoff::is_shortage(boost::asio::error::no_buffer_space));
  CHECK_FALSE(AcceptBackoff::is_shortage(boost::asio::error::connection_aborted));
}
