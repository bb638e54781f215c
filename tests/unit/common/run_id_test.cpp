#include "common/run_id.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

TEST_CASE("run ids that torchrun users give are accepted", "[unit][common]") {
  for (const char* id : {"none", "job-123", "exp_4.1", "slurm-4242.0", "launch-1b4e28ba-2fa1-11d2",
                         "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "user@host:run", "A.b_c-9"}) {
    INFO(id);
    CHECK(run_id_problem(id).empty());
    CHECK(run_id_path_component(id) == id);
  }
  CHECK(run_id_problem(std::string(kMaxRunIdLength, 'x')).empty());
}

TEST_CASE("run ids that could leave the log directory or break a line are refused",
          "[unit][common]") {
  CHECK(run_id_problem("") == "the run id is empty");
  CHECK(run_id_problem(std::string(kMaxRunIdLength + 1, 'x')) ==
        "the run id is 129 characters long; at most 128 are allowed");
  CHECK(run_id_problem("../../escape") ==
        "the run id contains '/'; only letters, digits and "
        ". _ - : @ are allowed");
  CHECK(run_id_problem("..") == "the run id starts with '.'");
  CHECK(run_id_problem(".hidden") == "the run id starts with '.'");
  CHECK(run_id_problem("a\nb").find("byte 0x0a") != std::string::npos);
  CHECK(run_id_problem("a b").find("byte 0x20") != std::string::npos);
  CHECK(run_id_problem("a\x7f").find("byte 0x7f") != std::string::npos);
  CHECK(run_id_problem("caf\xc3\xa9").find("byte 0xc3") != std::string::npos);
  CHECK_FALSE(run_id_problem("$HOME").empty());
}

TEST_CASE("any run id becomes one path component inside its parent", "[unit][common]") {
  CHECK(run_id_path_component("../../escape") == "_._.._escape");
  CHECK(run_id_path_component("..") == "_.");
  CHECK(run_id_path_component(".") == "_");
  CHECK(run_id_path_component("") == "_");
  CHECK(run_id_path_component("a/b\nc") == "a_b_c");
  CHECK(run_id_path_component(std::string(10000, 'x')).size() == kMaxRunIdLength);
}
