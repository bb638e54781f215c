// FailureBlame: a round's failure counts against the first reporter's host unless another host
// reported the same cause in that round; shared failures are counted in a row.
#include "rendezvous/failure_blame.hpp"

#include <catch2/catch.hpp>

using namespace cohort::rdzv;

TEST_CASE("a failure only one host reports counts against that host", "[unit][rendezvous]") {
  FailureBlame blame;
  CHECK_FALSE(blame.pending());
  blame.first(3, "h1", "exit code 1: RuntimeError: CUDA error");
  blame.also(3, "h2", "signal 15 (SIGTERM)");                    // a consequence, not the same
  blame.also(2, "h2", "exit code 1: RuntimeError: CUDA error");  // an earlier round
  blame.also(3, "h1", "exit code 1: RuntimeError: CUDA error");  // the same host again
  CHECK(blame.pending());
  CHECK(blame.settle() == std::optional<std::string>("h1"));
  CHECK_FALSE(blame.pending());
  CHECK(blame.shared_in_a_row() == 0);
}

TEST_CASE("a failure two hosts report the same way is the job's, counted in a row",
          "[unit][rendezvous]") {
  const std::string batch = "exit code 1: ValueError: 32 is not a multiple of 6";
  FailureBlame blame;
  for (int round = 0; round < 2; ++round) {
    blame.first(round, "h2", batch);
    blame.also(round, "h1", batch);
    CHECK(blame.settle() == std::nullopt);
    CHECK(blame.shared_in_a_row() == round + 1);
  }
  CHECK(blame.repeats_shared(batch));
  CHECK_FALSE(blame.repeats_shared("exit code 1: other"));
  blame.first(2, "h2", "exit code 1: other");  // only h2 this time: h2's, and the row is broken
  CHECK(blame.settle() == std::optional<std::string>("h2"));
  CHECK(blame.shared_in_a_row() == 0);
  CHECK_FALSE(blame.repeats_shared(batch));
}

TEST_CASE("a failure without a cause (a hang's root rank, an older agent) is never shared",
          "[unit][rendezvous]") {
  FailureBlame blame;
  blame.first(0, "h1", "");
  blame.also(0, "h2", "");
  CHECK(blame.settle() == std::optional<std::string>("h1"));
}
