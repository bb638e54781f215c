#include <catch2/catch.hpp>

#include "launcher/cli/moved_rendezvous.hpp"

using namespace cohort;

TEST_CASE("status and stop read --rdzv-fallback as run does, the endpoint's port by default",
          "[unit][launcher][fallback]") {
  std::string problem;
  auto endpoints = parse_fallback_list("node2,node3:7,::1", "node1:29456", problem);
  REQUIRE(endpoints);
  CHECK(*endpoints == std::vector<std::string>{"node2:29456", "node3:7", "[::1]:29456"});
  CHECK(parse_fallback_list("node2", "node1", problem)->at(0) == "node2:29400");

  CHECK_FALSE(parse_fallback_list("node2,,node3", "node1", problem));
  CHECK(problem ==
        "--rdzv-fallback: expected host[:port],... (port 1-65535), got '' in "
        "'node2,,node3'");
  CHECK_FALSE(parse_fallback_list("node2:0", "node1", problem));
  CHECK_FALSE(parse_fallback_list("a,b,c,d,e,f,g,h,i", "node1", problem));
  CHECK(problem == "--rdzv-fallback: at most 8 endpoints, got 9");
}
