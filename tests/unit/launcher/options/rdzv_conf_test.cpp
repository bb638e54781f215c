#include <catch2/catch.hpp>

#include "launcher/options/rdzv_conf.hpp"

using namespace cohort;
using namespace std::chrono_literals;

TEST_CASE("rdzv-conf takes torchrun's keys", "[unit][launcher]") {
  std::vector<std::string> problems;
  RdzvConf conf = parse_rdzv_conf(
      "join_timeout=30,last_call_timeout=0.5,heartbeat_timeout=3,keep_alive_interval=0.2,"
      "is_host=false,read_timeout=60,close_timeout=5,store_type=tcp",
      problems);
  CHECK(problems.empty());
  CHECK(conf.join_timeout == 30s);
  CHECK(conf.last_call_timeout == 500ms);
  CHECK(conf.heartbeat_timeout == 3s);
  CHECK(conf.heartbeat_interval == 200ms);
  CHECK(conf.is_host == false);
}

TEST_CASE("keep_alive_max_attempt sets the timeout from the interval", "[unit][launcher]") {
  std::vector<std::string> problems;
  RdzvConf conf = parse_rdzv_conf("keep_alive_interval=2,keep_alive_max_attempt=4", problems);
  CHECK(problems.empty());
  CHECK(conf.heartbeat_timeout == 8s);
}

TEST_CASE("a keep_alive_max_attempt out of range is refused and sets nothing", "[unit][launcher]") {
  // Found by the launcher_inputs fuzzer: the refused count still multiplied the interval, and a
  // huge one overflowed (undefined behaviour, then a second, wrong complaint about the timeout).
  for (const char* count : {"0", "1001", "44444444044444444", "-9223372036854775807"}) {
    INFO(count);
    std::vector<std::string> problems;
    RdzvConf conf = parse_rdzv_conf(std::string("keep_alive_max_attempt=") + count, problems);
    CHECK(problems == std::vector<std::string>{std::string("--rdzv-conf: keep_alive_max_attempt=") +
                                               count + ": expected a count from 1 to 1000"});
    CHECK(conf.heartbeat_timeout == RdzvConf{}.heartbeat_timeout);
  }
}

TEST_CASE("rdzv-conf takes any key as torchrun does and booleans as torchrun reads them",
          "[unit][launcher]") {
  std::vector<std::string> problems;
  RdzvConf conf = parse_rdzv_conf("foo=1,join_timeout=30,jion_timeout=5,read_timeout=60", problems);
  CHECK(problems.empty());
  CHECK(conf.unknown_keys == std::vector<std::string>{"foo", "jion_timeout"});
  CHECK(conf.join_timeout == 30s);
  for (const char* yes : {"1", "true", "t", "yes", "y", "True", "T", "Y"}) {
    INFO(yes);
    CHECK(parse_rdzv_conf(std::string("is_host=") + yes, problems).is_host == true);
  }
  for (const char* no : {"0", "false", "f", "no", "n", "FALSE", "F", "N"}) {
    INFO(no);
    CHECK(parse_rdzv_conf(std::string("is_host=") + no, problems).is_host == false);
  }
  CHECK(problems.empty());
}

TEST_CASE("bad rdzv-conf entries name the key", "[unit][launcher]") {
  std::vector<std::string> problems;
  parse_rdzv_conf("join_timeout=-1,is_host=maybe,store_type=file,nokey", problems);
  REQUIRE(problems.size() == 4);
  CHECK(problems[0].find("--rdzv-conf: join_timeout=-1") == 0);
  CHECK(problems[1] ==
        "--rdzv-conf: is_host=maybe: expected 1, true, t, yes, y, or 0, false, f, no, n");
  CHECK(problems[2].find("store_type=file") != std::string::npos);
  CHECK(problems[3].find("'nokey' is not key=value") != std::string::npos);
  // Keys cohort has no use for are still checked as torchrun checks them: a typo shows.
  problems.clear();
  parse_rdzv_conf("read_timeout=abc,close_timeout=5s,timeout=60,use_libuv=maybe", problems);
  REQUIRE(problems.size() == 3);
  CHECK(problems[0] == "--rdzv-conf: read_timeout=abc: expected a whole number");
  CHECK(problems[1] == "--rdzv-conf: close_timeout=5s: expected a whole number");
  CHECK(problems[2].find("use_libuv=maybe: expected 1, true") != std::string::npos);
  problems.clear();
  parse_rdzv_conf("keep_alive_interval=5,heartbeat_timeout=2", problems);
  CHECK(problems.size() == 1);
  // Seconds that would overflow a duration (or are not numbers) are errors, not garbage.
  problems.clear();
  parse_rdzv_conf("join_timeout=1e300,last_call_timeout=inf,heartbeat_timeout=nan", problems);
  REQUIRE(problems.size() == 3);
  CHECK(problems[0].find("--rdzv-conf: join_timeout=1e300: expected a positive number of "
                         "seconds, at most a year") == 0);
  CHECK(problems[1].find("last_call_timeout=inf") != std::string::npos);
  CHECK(problems[2].find("heartbeat_timeout=nan") != std::string::npos);
}

TEST_CASE("heartbeat settings have floors", "[unit][launcher]") {
  auto problems_of = [](const std::string& text) {
    std::vector<std::string> problems;
    parse_rdzv_conf(text, problems);
    return problems;
  };
  CHECK(problems_of("keep_alive_interval=0.05,heartbeat_timeout=0.2").empty());
  CHECK(problems_of("keep_alive_interval=0.1,heartbeat_timeout=0.2").empty());
  CHECK(problems_of("keep_alive_interval=0.001,heartbeat_timeout=0.002") ==
        std::vector<std::string>{"--rdzv-conf: keep_alive_interval=0.001: at least 0.05 s",
                                 "--rdzv-conf: heartbeat_timeout=0.002: at least 0.2 s"});
  CHECK(problems_of("heartbeat_interval=0.01") ==
        std::vector<std::string>{"--rdzv-conf: heartbeat_interval=0.01: at least 0.05 s"});
  CHECK(problems_of("keep_alive_interval=1,heartbeat_timeout=1.5") ==
        std::vector<std::string>{"--rdzv-conf: heartbeat_timeout (1.5 s) must be at least twice "
                                 "keep_alive_interval (1 s)"});
  CHECK(problems_of("keep_alive_interval=1,keep_alive_max_attempt=1") ==
        std::vector<std::string>{
            "--rdzv-conf: heartbeat_timeout (1 s: keep_alive_interval x "
            "keep_alive_max_attempt=1) must be at least twice keep_alive_interval (1 s)"});
  CHECK(problems_of("keep_alive_interval=0.05,keep_alive_max_attempt=3") ==
        std::vector<std::string>{"--rdzv-conf: heartbeat_timeout (0.15 s: keep_alive_interval x "
                                 "keep_alive_max_attempt=3) must be at least 0.2 s"});
  CHECK(problems_of("keep_alive_max_attempt=1001").size() == 1);
  CHECK(problems_of("keep_alive_interval=31536000,keep_alive_max_attempt=1000") ==
        std::vector<std::string>{"--rdzv-conf: heartbeat_timeout (3.1536e+10 s: "
                                 "keep_alive_interval x keep_alive_max_attempt=1000) must be at "
                                 "most a year"});
}
