#include "launcher/options/fallback_list.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

namespace {

std::vector<std::string> texts(const std::vector<HostPort>& endpoints) {
  std::vector<std::string> out;
  for (const HostPort& endpoint : endpoints)
    out.push_back(host_port_text(endpoint.host, endpoint.port));
  return out;
}

}  // namespace

TEST_CASE("the --rdzv-fallback list is read in order with the endpoint's port by default",
          "[unit][launcher][fallback]") {
  std::string problem;
  auto endpoints = parse_fallback_list("node2,node3:7,::1", 29456, problem);
  REQUIRE(endpoints);
  CHECK(texts(*endpoints) == std::vector<std::string>{"node2:29456", "node3:7", "[::1]:29456"});
  CHECK(texts(*parse_fallback_list("a,b,c,d,e,f,g,h", 29400, problem)).size() == 8);

  CHECK_FALSE(parse_fallback_list("node2,,node3", 29400, problem));
  CHECK(problem ==
        "--rdzv-fallback: expected host[:port],... (port 1-65535), got '' in "
        "'node2,,node3'");
  CHECK_FALSE(parse_fallback_list("node2:0", 29400, problem));
  CHECK(problem ==
        "--rdzv-fallback: expected host[:port],... (port 1-65535), got 'node2:0' in 'node2:0'");
  CHECK_FALSE(parse_fallback_list("a,b,c,d,e,f,g,h,i", 29400, problem));
  CHECK(problem == "--rdzv-fallback: at most 8 endpoints, got 9");
}
