// Events as lines people read (cohort status --events, the timeline page's table): a failure
// summary by its meaningful line rather than its "=====" banner, a round's members as addresses
// with rank ranges rather than JSON, a scale-up said as a new round rather than a restart.
#include "observe/event_text.hpp"

#include <catch2/catch.hpp>

using namespace cohort::observe;
using nlohmann::json;

namespace {

json daemon_event(const std::string& name, json fields) {
  fields["time"] = "2026-11-23T19:07:12.345Z";
  fields["t_ms"] = 1795460832345;
  fields["source"] = "daemon";
  fields["seq"] = 7;
  fields["run"] = "demo";
  fields["event"] = name;
  return fields;
}

}  // namespace

TEST_CASE("the meaningful line of a summary skips its banners", "[unit][observe][events]") {
  CHECK(meaningful_line("=====\ntrain.py FAILED\n-----\nFailures:") == "train.py FAILED");
  CHECK(meaningful_line("  \n--- \n  worker died  \n") == "worker died");
  CHECK(meaningful_line("==========") == "");
  CHECK(meaningful_line("") == "");
}

TEST_CASE("a round's members read as hosts and addresses with their global ranks",
          "[unit][observe][events]") {
  json members = json::array({{{"node", "127.0.0.3:2:2#0"},
                               {"address", "127.0.0.3"},
                               {"group_rank", 1},
                               {"local_world_size", 4}},
                              {{"node", "127.0.0.2:1:1#0"},
                               {"address", "127.0.0.2"},
                               {"host", "node-a"},
                               {"group_rank", 0},
                               {"local_world_size", 4}},
                              {{"node", "n3"}, {"group_rank", 2}, {"local_world_size", 1}}});
  CHECK(members_text(members) == "node-a (127.0.0.2) ranks 0-3, 127.0.0.3 ranks 4-7, n3 rank 8");
  CHECK(members_text(json("not a list")) == "");
}

TEST_CASE("events read as one-liners, without JSON or banners", "[unit][observe][events]") {
  json round =
      daemon_event("round.started", {{"round", 1},
                                     {"world_size", 4},
                                     {"members", json::array({{{"node", "a#0"},
                                                               {"address", "127.0.0.2"},
                                                               {"group_rank", 0},
                                                               {"local_world_size", 2}},
                                                              {{"node", "b#0"},
                                                               {"address", "127.0.0.3"},
                                                               {"group_rank", 1},
                                                               {"local_world_size", 2}}})}});
  CHECK(event_line(round) ==
        "19:07:12.345  round.started  round 1, 4 ranks: 127.0.0.2 ranks 0-1, 127.0.0.3 ranks 2-3");

  json failed = daemon_event("worker.failed", {{"node", "a#0"},
                                               {"host", "vm"},
                                               {"round", 0},
                                               {"rank", 1},
                                               {"local_rank", 1},
                                               {"status", "signal 6 (SIGABRT)"},
                                               {"summary", "=====================\n"}});
  std::string line = event_line(failed);
  CHECK(line ==
        "19:07:12.345  worker.failed  rank 1 (local 1) on vm (a#0), round 0: signal 6 "
        "(SIGABRT)");
  failed["summary"] = "==========\nhang_worker.py FAILED\n----------";
  CHECK(event_line(failed).find("(SIGABRT): hang_worker.py FAILED") != std::string::npos);
  CHECK(event_line(failed).find("=====") == std::string::npos);

  json scale_up = daemon_event("restart.decided", {{"round", 0},
                                                   {"reason", "scale-up: new nodes joined"},
                                                   {"restarts_used", 0},
                                                   {"restarts_left", 3},
                                                   {"backoff_ms", 0},
                                                   {"scale_up", true}});
  CHECK(event_line(scale_up) ==
        "19:07:12.345  restart.decided  new round after round 0: scale-up: new nodes joined "
        "(restarts used 0, left 3)");
}

TEST_CASE("an event the formatter does not know reads as key=value pairs",
          "[unit][observe][events]") {
  json odd =
      daemon_event("something.new",
                   {{"count", 3}, {"ranks", json::array({0, 1})}, {"text", "line one\nline two"}});
  CHECK(event_line(daemon_event("run.completed", {{"rounds", 3}, {"restarts_used", 1}})) ==
        "19:07:12.345  run.completed  after 3 rounds, 1 restart");
  CHECK(event_line(odd) == "19:07:12.345  something.new  count=3  ranks=0,1  text=line one");
  CHECK(is_scale_up("scale-up: an excluded host's cooldown ended"));
  CHECK_FALSE(is_scale_up("node 127.0.0.4 lost: connection closed"));
}

TEST_CASE("the first round of a run taken over says after which round and from where",
          "[unit][observe][events]") {
  CHECK(resumed_text(-1, "gpu-1:29400") == "");
  CHECK(resumed_text(0, "") == "resumed here after round 0 (the daemon restarted)");
  CHECK(resumed_text(3, "gpu-1:29400") ==
        "resumed here after round 3, which ran at gpu-1:29400 (--rdzv-fallback)");
  json member = {
      {"node", "a#0"}, {"address", "127.0.0.2"}, {"group_rank", 0}, {"local_world_size", 1}};
  json round = daemon_event("round.started", {{"round", 4},
                                              {"world_size", 1},
                                              {"members", json::array({member})},
                                              {"resumed_after", 3},
                                              {"moved_from", "gpu-1:29400"}});
  CHECK(event_line(round) ==
        "19:07:12.345  round.started  round 4, 1 rank: 127.0.0.2 rank 0; resumed here after round "
        "3, which ran at gpu-1:29400 (--rdzv-fallback)");
  round["resumed_after"] = "3";  // not a number: said as if absent
  CHECK(event_line(round) == "19:07:12.345  round.started  round 4, 1 rank: 127.0.0.2 rank 0");
}
