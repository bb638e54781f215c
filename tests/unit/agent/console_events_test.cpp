#include "agent/console_events.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

TEST_CASE("flag --event-log-handler console: one line per event", "[unit][agent]") {
  CHECK(events::run_started("job", "node1", 4) ==
        "cohort event: agent.start run_id=job host=node1 local_world_size=4\n");
  proto::RoundAssigned round;
  round.round = 2;
  round.group_rank = 1;
  round.group_world_size = 2;
  round.world_size = 8;
  round.master_addr = "10.0.0.1";
  round.master_port = 29500;
  round.restarts_used = 1;
  CHECK(events::round_complete("job", round) ==
        "cohort event: rendezvous.complete run_id=job round=2 group_rank=1 group_world_size=2 "
        "world_size=8 master=10.0.0.1:29500 restarts_used=1\n");
  WorkerFailure failure;
  failure.rank = 5;
  failure.local_rank = 1;
  failure.pid = 123;
  failure.status = ExitStatus::exited(3);
  std::string failed = events::worker_failed("job", 2, failure);
  CHECK(failed.rfind("cohort event: worker.failed run_id=job round=2 rank=5 local_rank=1 pid=123 "
                     "status=",
                     0) == 0);
  CHECK(events::restarting("job", "node 1 failed") ==
        "cohort event: worker_group.restart run_id=job reason=\"node 1 failed\"\n");
  CHECK(events::run_ended("job", 0) == "cohort event: agent.end run_id=job exit_code=0\n");
}
