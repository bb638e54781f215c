// The flight-recorder dump wait's pure core: a dump is complete once its size held (non-zero)
// for the settle time, the wait ends when all are complete or at the deadline set when they were
// asked (later sizes never move it; a pause does), and the summary's line for each; where the dump
// goes.
#include <catch2/catch.hpp>

#include "agent/flight_recorder_dumps.hpp"
#include "agent/worker_env.hpp"

using namespace cohort;
using namespace std::chrono_literals;

namespace {

const SteadyTime kAsked{std::chrono::seconds(100)};

std::vector<FlightRecorderDump> two_ranks() {
  return {{0, "/logs/attempt_0/nccl_trace_rank_0", std::nullopt, false},
          {1, "/logs/attempt_0/nccl_trace_rank_1", std::nullopt, false}};
}

}  // namespace

TEST_CASE("a dump is complete once its size held for the settle time", "[unit][agent][hang]") {
  DumpWait wait(two_ranks(), kAsked, 10s);
  wait.observe(0, std::nullopt, kAsked + 1s);
  wait.observe(0, 0, kAsked + 1600ms);  // created, nothing written yet
  wait.observe(0, 0, kAsked + 2600ms);
  CHECK_FALSE(wait.dumps()[0].complete);  // an empty file is not a dump
  wait.observe(0, 1000, kAsked + 2700ms);
  wait.observe(0, 3433, kAsked + 2800ms);  // still growing
  wait.observe(0, 3433, kAsked + 3299ms);
  CHECK_FALSE(wait.dumps()[0].complete);
  CHECK_FALSE(wait.finished(kAsked + 3299ms));
  wait.observe(0, 3433, kAsked + 3300ms);
  CHECK(wait.dumps()[0].complete);
  CHECK(wait.dumps()[0].bytes == 3433u);
  CHECK_FALSE(wait.finished(kAsked + 3300ms));  // rank 1 still owes its dump
  wait.observe(1, 200, kAsked + 4s);
  wait.observe(1, 200, kAsked + 4500ms);
  CHECK(wait.finished(kAsked + 4500ms));
}

TEST_CASE("the dump wait ends at its deadline, whatever the files do", "[unit][agent][hang]") {
  DumpWait wait(two_ranks(), kAsked, 10s);
  CHECK(wait.deadline() == kAsked + 10s);
  for (auto at = 1s; at < 10s; at += 1s) {
    wait.observe(0, static_cast<uint64_t>(at.count()), kAsked + at);  // grows every look
    wait.observe(1, std::nullopt, kAsked + at);
    CHECK_FALSE(wait.finished(kAsked + at));
  }
  CHECK(wait.deadline() == kAsked + 10s);  // growth does not move it
  CHECK(wait.finished(kAsked + 10s));
  CHECK_FALSE(wait.dumps()[0].complete);
  CHECK(wait.dumps()[0].bytes == 9u);
  CHECK_FALSE(wait.dumps()[1].bytes);
}

TEST_CASE("a pause moves the dump wait's deadline and a dump's settling by its length",
          "[unit][agent][hang]") {
  // Rank 0 wrote half its dump, then the node was paused for 20 s: its size held through the
  // pause only because it was stopped, and the 10 s wait is not over.
  DumpWait wait(two_ranks(), kAsked, 10s);
  wait.observe(0, 1000, kAsked + 1s);
  wait.postpone(20s);
  CHECK(wait.deadline() == kAsked + 30s);
  wait.observe(0, 1000, kAsked + 21100ms);
  CHECK_FALSE(wait.dumps()[0].complete);
  CHECK_FALSE(wait.finished(kAsked + 21100ms));
  wait.observe(0, 3433, kAsked + 21200ms);  // the rest, once continued
  wait.observe(0, 3433, kAsked + 21700ms);
  CHECK(wait.dumps()[0].complete);
  CHECK(wait.dumps()[0].bytes == 3433u);
  CHECK(wait.finished(kAsked + 30s));
}

TEST_CASE("a dump wait with nothing asked is finished at once", "[unit][agent][hang]") {
  DumpWait wait({}, kAsked, 10s);
  CHECK(wait.finished(kAsked));
}

TEST_CASE("the summary's line for each dump", "[unit][agent][hang]") {
  FlightRecorderDump dump{1, "/logs/run/attempt_0/nccl_trace_rank_1", 3433, true};
  CHECK(dump_line(dump, 10s, true) ==
        "flight recorder dump of rank 1: /logs/run/attempt_0/nccl_trace_rank_1 (3433 bytes)");
  CHECK(dump_line(dump, 10s, false) ==
        "flight recorder dump of rank 1: /logs/run/attempt_0/nccl_trace_rank_1 (3433 bytes) "
        "(removed at exit; --log-dir keeps it)");
  dump.complete = false;
  CHECK(dump_line(dump, 2500ms, true) ==
        "flight recorder dump of rank 1: /logs/run/attempt_0/nccl_trace_rank_1 (3433 bytes, "
        "still being written after 2.5 s)");
  dump.bytes.reset();
  CHECK(dump_line(dump, 10s, true) == "rank 1 wrote no dump within 10 s");
}

TEST_CASE("where a rank's flight recorder writes its dump", "[unit][agent][hang]") {
  EnvMap vars = hang_variables("/logs/run/attempt_2", {}, WorkerEnvSettings{});
  CHECK(nccl_dump_file(vars, 5) == "/logs/run/attempt_2/nccl_trace_rank_5");
  CHECK(nccl_dump_file({{"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/old/t_"}}, 1) == "/old/t_1");
  CHECK(nccl_dump_file({{"TORCH_FR_DUMP_TEMP_FILE", "/new/t_"},
                        {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/old/t_"}},
                       1) == "/new/t_1");
  CHECK(nccl_dump_file({}, 3) == "/tmp/nccl_trace_rank_3");
}
