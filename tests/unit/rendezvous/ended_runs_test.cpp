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

  std::optional<proto::ControlMessage> late = ended.late_join("job", end - 2500ms);
  REQUIRE(late);
  const auto* stop = std::get_if<proto::Stop>(&*late);
  REQUIRE(stop);
  CHECK(stop->exit_status == 130);
  CHECK(stop->reason ==
        "maintenance (the run ended 2.5 s after this node started, before it joined)");
  CHECK(stop->summary.empty());  // the members' report is not kept
  CHECK(stop->stopped_by == "alice@login");

  CHECK_FALSE(ended.late_join("job", end));           // started as it ended: a new job
  CHECK_FALSE(ended.late_join("job", end + 1s));      // a new job under the same id
  CHECK_FALSE(ended.late_join("job", std::nullopt));  // an older agent that does not say
  CHECK_FALSE(ended.late_join("other", end - 1s));    // a run that never ended here
}

TEST_CASE("a completed run is an error for a late agent, and the latest ending counts",
          "[unit][rendezvous][ended]") {
  EndedRuns ended;
  ended.ended("job", TimePoint{10s}, proto::Stop{1, "worker failed", "", ""});
  ended.ended("job", TimePoint{50s}, std::nullopt);  // the id was used again, and completed
  std::optional<proto::ControlMessage> late = ended.late_join("job", TimePoint{5s});
  REQUIRE(late);
  const auto* error = std::get_if<proto::Error>(&*late);
  REQUIRE(error);
  CHECK(error->message ==
        "run 'job' has already finished: it completed 45 s after this node started, before it "
        "joined");
  CHECK_FALSE(error->rejoin);
  CHECK(ended.late_join("job", TimePoint{20s}));  // started during the second use
}

TEST_CASE("ended runs are bounded: the oldest ending is forgotten, a long reason is cut",
          "[unit][rendezvous][ended]") {
  EndedRuns ended;
  for (size_t i = 0; i < kMaxEndedRuns + 10; ++i) {
    ended.ended("run" + std::to_string(i), TimePoint{std::chrono::seconds(i + 1)}, std::nullopt);
  }
  CHECK(ended.size() == kMaxEndedRuns);
  CHECK_FALSE(ended.late_join("run0", TimePoint{0s}));
  CHECK_FALSE(ended.late_join("run9", TimePoint{0s}));
  CHECK(ended.late_join("run10", TimePoint{0s}));

  ended.ended("long", TimePoint{1h}, proto::Stop{130, std::string(100000, 'r'), "", ""});
  auto stop = std::get<proto::Stop>(*ended.late_join("long", TimePoint{0s}));
  CHECK(stop.reason.size() < proto::kMaxFailureTextBytes + 100);
}
