#include "launcher/status_watch.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

namespace {

StatusFetch one_run() {
  proto::StatusRun run{"job", "running", 3, 1, 3, 2, 4, 41817, {}};
  run.nodes.push_back({"127.0.0.2:1:1#0", "127.0.0.2", "member", 0, 2, false, 300});
  run.nodes.push_back({"127.0.0.3:1:1#0", "127.0.0.3", "member", 1, 2, true, 12500});
  run.last_failure = "node 127.0.0.4 lost: connection closed (End of file)";
  return {proto::StatusReply{29400, {run}}, 0, ""};
}

}  // namespace

TEST_CASE("the watch screen: a run line, a line per node with its heartbeat age",
          "[unit][launcher][status]") {
  StatusQuery query;
  query.endpoint = "head:29400";
  std::string screen =
      watch_screen(one_run(), query, std::chrono::milliseconds(2000), "12:00:00", 0);
  CHECK(screen ==
        "cohort status --watch  head:29400  every 2.0 s  12:00:00  (Ctrl-C to stop)\n\n"
        "RUN                 PHASE     ROUND  NODES      RESTARTS  LAST FAILURE\n"
        "  NODE              STATE      RANK  WORKERS  HEARTBEAT\n"
        "job                 running   3      2 (2:4)    1/3       node 127.0.0.4 lost: "
        "connection closed (End of file)\n"
        "  127.0.0.2         member     0     2        0.3 s     \n"
        "  127.0.0.3         member     1     2        12 s      done\n");
}

TEST_CASE("the watch screen fits the terminal and shows why there is no status",
          "[unit][launcher][status]") {
  StatusQuery query;
  std::string narrow = watch_screen(one_run(), query, std::chrono::milliseconds(500), "x", 30);
  for (size_t start = 0, end; (end = narrow.find('\n', start)) != std::string::npos;
       start = end + 1)
    CHECK(end - start <= 30);
  StatusFetch failed{std::nullopt, 3, "cannot reach head:29400: Connection refused\nsecond"};
  std::string screen = watch_screen(failed, query, std::chrono::milliseconds(500), "x", 0);
  CHECK(screen.find("cannot reach head:29400: Connection refused second\n") != std::string::npos);
  proto::StatusReply empty{29400, {}};
  CHECK(watch_screen({empty, 0, ""}, query, std::chrono::milliseconds(500), "x", 0)
            .find("no runs\n") != std::string::npos);
}
