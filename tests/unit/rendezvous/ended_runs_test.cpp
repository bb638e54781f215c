#include "rendezvous/ended_runs.hpp"

#include <catch2/catch.hpp>

using namespace cohort;
using namespace cohort::rdzv;
using namespace std::chrono_literals;

TEST_CASE("an agent started before its run was stopped hears the stop, one started after does not",
          "[unit][rendezvous][ended]") {
  EndedRuns ended;
  TimePoint end{100s};
  ended.ended("job", end, proto::Stop{130, "maintenance", "rank 3 failed: ...", "alice@login"});

  std::vector<proto::ControlMessage> late = ended.late_join("job", end - 2500ms);
  REQUIRE(late.size() == 1);
  const auto* stop = std::get_if<proto::Stop>(&late[0]);
  REQUIRE(stop);
  CHECK(stop->exit_status == 130);
  CHECK(stop->reason ==
        "maintenance (the run ended 2.5 s after this node started, before it joined)");
  CHECK(stop->summary.empty());  // the members' report is not kept
  CHECK(stop->stopped_by == "alice@login");

  CHECK(ended.late_join("job", end).empty());           // started as it ended: a new job
  CHECK(ended.late_join("job", end + 1s).empty());      // a new job under the same id
  CHECK(ended.late_join("job", std::nullopt).empty());  // an older agent that does not say
  CHECK(ended.late_join("other", end - 1s).empty());    // a run that never ended here
  CHECK(ended.has("job"));
  CHECK_FALSE(ended.has("other"));
}

TEST_CASE("a late agent of a completed run is told it came late, then that the run is complete",
          "[unit][rendezvous][ended]") {
  EndedRuns ended;
  ended.ended("job", TimePoint{10s}, proto::Stop{1, "worker failed", "", ""});
  ended.ended("job", TimePoint{50s}, std::nullopt);  // the id was used again, and completed
  std::vector<proto::ControlMessage> late = ended.late_join("job", TimePoint{5s});
  REQUIRE(late.size() == 2);
  const auto* notice = std::get_if<proto::Notice>(&late[0]);
  REQUIRE(notice);
  CHECK(notice->text == "run 'job' completed 45 s after this node started, before it joined");
  CHECK(std::holds_alternative<proto::Complete>(late[1]));
  CHECK(ended.late_join("job", TimePoint{20s}).size() == 2);  // started during the second use
}

TEST_CASE("ended runs are bounded: the oldest ending is forgotten, a long reason is cut",
          "[unit][rendezvous][ended]") {
  EndedRuns ended;
  for (size_t i = 0; i < kMaxEndedRuns + 10; ++i) {
    ended.ended("run" + std::to_string(i), TimePoint{std::chrono::seconds(i + 1)}, std::nullopt);
  }
  CHECK(ended.size() == kMaxEndedRuns);
  CHECK(ended.late_join("run0", TimePoint{0s}).empty());
  CHECK(ended.late_join("run9", TimePoint{0s}).empty());
  CHECK_FALSE(ended.late_join("run10", TimePoint{0s}).empty());

  ended.ended("long", TimePoint{1h}, proto::Stop{130, std::string(100000, 'r'), "", ""});
  auto stop = std::get<proto::Stop>(ended.late_join("long", TimePoint{0s}).at(0));
  CHECK(stop.reason.size() < proto::kMaxFailureTextBytes + 100);
}
