#include "rendezvous/from_wire.hpp"

#include <catch2/catch.hpp>

using namespace cohort;
using namespace std::chrono_literals;

TEST_CASE("a hello's run settings become the state machine's config", "[unit][rendezvous]") {
  proto::WireRunConfig wire{2, 4, 3, 1500, 600000, 30000, 5, 120000};
  rdzv::RunConfig config = rdzv::from_wire(wire);
  CHECK(config.min_nodes == 2);
  CHECK(config.max_nodes == 4);
  CHECK(config.max_restarts == 3);
  CHECK(config.last_call == 1500ms);
  CHECK(config.join_timeout == 600000ms);
  CHECK(config.heartbeat_timeout == 30000ms);
  CHECK(config.host_failure_limit == 5);
  CHECK(config.host_cooldown == 120000ms);
}

TEST_CASE("a worker's failure and a carried outcome keep every field", "[unit][rendezvous]") {
  proto::WorkerFailed failed{1, 6, 2, 137, "signal 9", "gpu-3", "summary", "crash loop", "boom"};
  rdzv::FailureReport report = rdzv::from_wire(failed);
  CHECK(report.round == 1);
  CHECK(report.rank == 6);
  CHECK(report.local_rank == 2);
  CHECK(report.exit_status == 137);
  CHECK(report.description == "signal 9");
  CHECK(report.host == "gpu-3");
  CHECK(report.summary == "summary");
  CHECK(report.final_reason == "crash loop");
  CHECK(report.cause == "boom");

  CHECK_FALSE(rdzv::from_wire(std::optional<proto::CarriedOutcome>()).has_value());
  auto succeeded = rdzv::from_wire(std::optional<proto::CarriedOutcome>({4, std::nullopt}));
  REQUIRE(succeeded.has_value());
  CHECK(succeeded->round == 4);
  CHECK_FALSE(succeeded->failure.has_value());
  auto carried = rdzv::from_wire(std::optional<proto::CarriedOutcome>({5, failed}));
  REQUIRE(carried->failure.has_value());
  CHECK(carried->failure->exit_status == 137);
}

TEST_CASE("a progress report keeps each rank's silence and step time", "[unit][rendezvous]") {
  proto::Progress wire{7,   true,    60000,
                       200, "gpu-4", {{0, 50, 12, 80}, {1, 9000, std::nullopt, std::nullopt}}};
  rdzv::ProgressReport report = rdzv::from_wire(wire);
  CHECK(report.round == 7);
  CHECK(report.hang);
  CHECK(report.hang_timeout == 60000ms);
  CHECK(report.straggler_factor_pct == 200);
  CHECK(report.host == "gpu-4");
  REQUIRE(report.ranks.size() == 2);
  CHECK(report.ranks[0].silent == 50ms);
  CHECK(report.ranks[0].step == 12);
  CHECK(report.ranks[0].step_time == std::optional<rdzv::Ms>(80ms));
  CHECK(report.ranks[1].local_rank == 1);
  CHECK(report.ranks[1].silent == 9000ms);
  CHECK_FALSE(report.ranks[1].step.has_value());
  CHECK_FALSE(report.ranks[1].step_time.has_value());
}
