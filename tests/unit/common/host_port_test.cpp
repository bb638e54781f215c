#include <catch2/catch.hpp>

#include "common/host_port.hpp"

using namespace cohort;

TEST_CASE("host[:port] in torchrun's forms", "[unit][common]") {
  auto plain = parse_host_port("node1", 29400);
  REQUIRE(plain);
  CHECK(plain->host == "node1");
  CHECK(plain->port == 29400);
  CHECK(parse_host_port("node1:1234", 29400)->port == 1234);
  CHECK(parse_host_port("10.0.0.1:0", 29400)->port == 0);
  auto v6 = parse_host_port("[fe80::1]:29500", 29400);
  REQUIRE(v6);
  CHECK(v6->host == "fe80::1");
  CHECK(v6->port == 29500);
  CHECK(parse_host_port("[::1]", 29400)->port == 29400);
  CHECK(parse_host_port("::1", 29400)->host == "::1");  // bare IPv6: no port
  CHECK_FALSE(parse_host_port("", 29400));
  CHECK_FALSE(parse_host_port(":80", 29400));
  CHECK_FALSE(parse_host_port("host:99999", 29400));
  CHECK_FALSE(parse_host_port("host:x", 29400));
  CHECK_FALSE(parse_host_port("host:", 29400));
  CHECK_FALSE(parse_host_port("[::1", 29400));
}

TEST_CASE("host:port written so that it reads back, IPv6 in brackets", "[unit][common]") {
  CHECK(host_port_text("node1", 29400) == "node1:29400");
  CHECK(host_port_text("10.0.0.1", 7) == "10.0.0.1:7");
  CHECK(host_port_text("fe80::1", 29400) == "[fe80::1]:29400");
  for (const char* host : {"node1", "10.0.0.1", "::1", "fe80::1"}) {
    auto back = parse_host_port(host_port_text(host, 29401), 1);
    REQUIRE(back);
    CHECK(back->host == host);
    CHECK(back->port == 29401);
  }
}

TEST_CASE("a host is an address literal or a host name and nothing else", "[unit][common]") {
  for (const char* good :
       {"node-1", "node_1", "gpu7.cluster.example.com", "gpu7.cluster.example.com.", "localhost",
        "127.0.0.1", "[fe80::1%eth0]"}) {
    INFO(good);
    CHECK(parse_host_port(good, 29400));
  }
  for (const char* bad :
       {"a,b", "-1", "node1-", "two words", "a..b", ".", "n\xff", "n\tx", "[not an address]"}) {
    INFO(bad);
    CHECK_FALSE(parse_host_port(bad, 29400));
  }
  CHECK_FALSE(parse_host_port(std::string(64, 'a') + ".b", 29400));  // a label past 63
  CHECK(parse_host_port(std::string(63, 'a') + ".b", 29400));
}

TEST_CASE("port ranges", "[unit][common]") {
  CHECK(parse_port_range("29500-29599") == std::make_pair(uint16_t{29500}, uint16_t{29599}));
  CHECK(parse_port_range("29500") == std::make_pair(uint16_t{29500}, uint16_t{29500}));
  CHECK_FALSE(parse_port_range("0-10"));
  CHECK_FALSE(parse_port_range("20-10"));
  CHECK_FALSE(parse_port_range("1-70000"));
  CHECK_FALSE(parse_port_range("a-b"));
}
