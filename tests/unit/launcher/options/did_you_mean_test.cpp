// Suggestions for mistyped commands and flags.
#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>

#include "launcher/options/did_you_mean.hpp"

using namespace cohort;

TEST_CASE("the closest name is suggested only when it is close", "[unit][launcher]") {
  std::vector<std::string> flags{"--rdzv-endpoint", "--rdzv-id", "--port", "--json"};
  CHECK(closest_name("--rdzv-endpiont", flags) == "--rdzv-endpoint");  // a swap
  CHECK(closest_name("--prot", flags) == "--port");
  CHECK(closest_name("--rdzv-i", flags) == "--rdzv-id");
  CHECK(closest_name("--verbose", flags).empty());
  CHECK(closest_name("runn", {"run", "launch", "rendezvous", "status"}) == "run");
  CHECK(closest_name("xy", {"run"}).empty());  // short words need a near-exact match
}

TEST_CASE("an unknown argument names itself and the suggestion", "[unit][launcher]") {
  CHECK(unknown_argument("--prot=29461", {"--port"}) ==
        "unknown argument '--prot=29461' (did you mean --port?)");
  CHECK(unknown_argument("extra", {"--port"}) == "unknown argument 'extra'");
}

TEST_CASE("a command's long flags are listed as typed", "[unit][launcher]") {
  CLI::App app;
  std::string value;
  app.add_option("--rdzv-endpoint,--rdzv_endpoint", value, "");
  std::vector<std::string> names = flag_names(app);
  CHECK(std::find(names.begin(), names.end(), "--rdzv_endpoint") != names.end());
  CHECK(std::find(names.begin(), names.end(), "--rdzv-endpoint") != names.end());
}
