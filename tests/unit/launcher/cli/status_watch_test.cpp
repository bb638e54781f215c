#include "launcher/cli/status_watch.hpp"

#include <catch2/catch.hpp>

#include "common/text.hpp"

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
        "RUN                 PHASE     ROUND  NODES      RESTARTS\n"
        "  NODE              STATE      RANK  WORKERS  HEARTBEAT\n"
        "job                 running   3      2 (2:4)    1/3\n"
        "  last failure: node 127.0.0.4 lost: connection closed (End of file)\n"
        "  127.0.0.2         member     0     2        0.3 s     \n"
        "  127.0.0.3         member     1     2        12 s      done\n");
}

TEST_CASE("the brief watch screen counts each run's nodes and lists none",
          "[unit][launcher][status]") {
  proto::StatusRun run{"job", "running", 3, 1, 3, 2, 10000, 41817, {}};
  run.more_nodes = 9998;
  run.live_nodes = 9990;
  StatusQuery query;
  query.endpoint = "head:29400";
  query.brief = true;
  std::string screen = watch_screen({proto::StatusReply{29400, {run}}, 0, ""}, query,
                                    std::chrono::milliseconds(2000), "12:00:00", 0);
  CHECK(screen ==
        "cohort status --watch  head:29400  every 2.0 s  12:00:00  (Ctrl-C to stop)\n\n"
        "RUN                 PHASE     ROUND  NODES      RESTARTS\n"
        "job                 running   3      9998 (2:10000) 1/3\n"
        "  9990 of 9998 nodes heard within the heartbeat timeout\n");
}

TEST_CASE("a watch that followed its run says from where, and looks again when the run is gone",
          "[unit][launcher][status]") {
  StatusQuery query;
  query.endpoint = "node2:29400";
  std::string screen =
      watch_screen(one_run(), query, std::chrono::milliseconds(2000), "12:00:00", 0, "node1:29400");
  CHECK(screen.rfind("cohort status --watch  node2:29400  every 2.0 s  12:00:00  (Ctrl-C to stop)\n"
                     "followed the run here from node1:29400 (--rdzv-fallback)\n\n"
                     "RUN ",
                     0) == 0);
  StatusFetch fetched = one_run();
  CHECK(shows_run(fetched, "job"));
  CHECK(shows_run(fetched, ""));
  CHECK_FALSE(shows_run(fetched, "other"));  // the daemon answers without the run
  fetched.reply->runs[0].phase = "forming";
  CHECK(shows_run(fetched, "job"));
  fetched.reply->runs[0].phase = "succeeded";  // an ended run may have gone on elsewhere
  CHECK_FALSE(shows_run(fetched, "job"));
  CHECK_FALSE(shows_run(StatusFetch{std::nullopt, 3, "connection refused"}, ""));
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
  StatusQuery one = query;  // a mistyped --rdzv-id: not "no runs" while other runs go on
  one.run_id = "nosuch";
  CHECK(watch_screen({empty, 0, ""}, one, std::chrono::milliseconds(500), "x", 0)
            .ends_with("\n\nno run 'nosuch' at " + query.endpoint + " (yet)\n"));
}

TEST_CASE("at 80 columns the last failure is whole, on lines of its own",
          "[unit][launcher][status]") {
  StatusFetch fetched = one_run();
  proto::StatusRun& run = fetched.reply->runs[0];
  run.last_failure =
      "worker rank 0 on vm failed with signal 6 (SIGABRT): rank 0 (local rank 0, pid 7798) made "
      "no progress for 2.0 s (last signal: step 4 at 16:49:35)";
  std::string screen =
      watch_screen(fetched, StatusQuery{}, std::chrono::milliseconds(2000), "12:00:00", 80);
  INFO(screen);
  for (size_t start = 0, end; (end = screen.find('\n', start)) != std::string::npos;
       start = end + 1)
    CHECK(end - start <= 80);
  CHECK(screen.find("job                 running   3      2 (2:4)    1/3\n"
                    "  last failure: worker rank 0 on vm failed with signal 6 (SIGABRT): rank 0\n"
                    "                (local rank 0, pid 7798) made no progress for 2.0 s (last\n"
                    "                signal: step 4 at 16:49:35)\n") != std::string::npos);
}

TEST_CASE("before the first round the watch screen shows no round number",
          "[unit][launcher][status]") {
  StatusFetch fetched = one_run();
  fetched.reply->runs[0].round = -1;
  fetched.reply->runs[0].phase = "forming";
  fetched.reply->runs[0].last_failure.clear();
  std::string screen =
      watch_screen(fetched, StatusQuery{}, std::chrono::milliseconds(2000), "x", 0);
  CHECK(screen.find("job                 forming   -      2 (2:4)    1/3\n") != std::string::npos);
  CHECK(screen.find("-1") == std::string::npos);
  CHECK(screen.find("last failure") == std::string::npos);
}

TEST_CASE("wrapped text breaks at spaces, cuts long words, and ends in ... past its lines",
          "[unit][launcher][status]") {
  CHECK(wrap_text("> ", "short", 20, 3) == std::vector<std::string>{"> short"});
  CHECK(wrap_text("> ", "aaa bbb ccc ddd", 9, 3) ==
        std::vector<std::string>{"> aaa bbb", "  ccc ddd"});
  CHECK(wrap_text("> ", "abcdefghijkl", 6, 5) ==
        std::vector<std::string>{"> abcd", "  efgh", "  ijkl"});
  CHECK(wrap_text("> ", "aaa bbb ccc ddd eee fff", 9, 2) ==
        std::vector<std::string>{"> aaa bbb", "  ccc..."});
  CHECK(wrap_text("> ", "a\x1b[2Jb", 0, 1) == std::vector<std::string>{"> a\\x1b[2Jb"});
}

TEST_CASE("wrapped text counts a character of several bytes as one column and never splits one",
          "[unit][launcher][status]") {
  const std::string e = "\xc3\xa9";  // é: two bytes, one column
  CHECK(wrap_text("> ", e + e + e + " " + e + e + e, 9, 3) ==
        std::vector<std::string>{"> " + e + e + e + " " + e + e + e});
  CHECK(wrap_text("> ", e + e + e + " " + e + e + e + " " + e + e + e, 9, 3) ==
        std::vector<std::string>{"> " + e + e + e + " " + e + e + e, "  " + e + e + e});
  std::string word;
  for (int i = 0; i < 12; ++i) word += e;
  CHECK(wrap_text("> ", word, 6, 5) == std::vector<std::string>{"> " + word.substr(0, 8),
                                                                "  " + word.substr(8, 8),
                                                                "  " + word.substr(16)});
  CHECK(wrap_text("> ", word + " " + word, 9, 1) ==
        std::vector<std::string>{"> " + word.substr(0, 8) + "..."});
}

TEST_CASE("the watch screen cuts lines at the terminal's columns between characters",
          "[unit][launcher][status]") {
  StatusFetch fetched = one_run();
  std::string host;
  for (int i = 0; i < 40; ++i) host += "\xe3\x83\x8e";  // ノ: three bytes, one column
  fetched.reply->runs[0].nodes[0].address = host;
  fetched.reply->runs[0].last_failure = "node " + host + " lost";
  for (int width : {30, 31, 32}) {
    std::string screen =
        watch_screen(fetched, StatusQuery{}, std::chrono::milliseconds(500), "x", width);
    INFO(screen);
    CHECK(screen.find("  " + host.substr(0, 3 * (width - 2)) + "\n") != std::string::npos);
    for (size_t start = 0, end; (end = screen.find('\n', start)) != std::string::npos;
         start = end + 1) {
      std::string line = screen.substr(start, end - start);
      CHECK(escape_for_terminal(line) == line);  // whole characters only: nothing to escape
    }
  }
}

TEST_CASE("the watch screen says after which round its daemon took the run over",
          "[unit][launcher][status]") {
  StatusQuery query;
  query.endpoint = "node2:29400";
  StatusFetch fetched = one_run();
  fetched.reply->runs[0].resumed_after = 2;
  fetched.reply->runs[0].moved_from = "node1:29400";
  std::string screen = watch_screen(fetched, query, std::chrono::milliseconds(2000), "12:00:00", 0);
  CHECK(screen.find("job                 running   3      2 (2:4)    1/3\n"
                    "  last failure: node 127.0.0.4 lost: connection closed (End of file)\n"
                    "  resumed here after round 2, which ran at node1:29400 (--rdzv-fallback)\n"
                    "  127.0.0.2 ") != std::string::npos);
  CHECK(one_run().reply->runs[0].resumed_after == -1);
  CHECK(watch_screen(one_run(), query, std::chrono::milliseconds(2000), "12:00:00", 0)
            .find("resumed") == std::string::npos);
}

TEST_CASE("a watch asks elsewhere at once, then less and less often, and at once after a sighting",
          "[unit][launcher][status]") {
  using namespace std::chrono_literals;
  ElsewhereLooks looks(2000ms);
  ElsewhereLooks::Clock::time_point t0{};
  CHECK(looks.due(t0));
  looks.found_nothing(t0);  // then 2, 4, 8, 16 s, and never more than 30 s apart
  CHECK_FALSE(looks.due(t0 + 1999ms));
  CHECK(looks.due(t0 + 2000ms));
  looks.found_nothing(t0 + 2000ms);
  CHECK_FALSE(looks.due(t0 + 5999ms));
  CHECK(looks.due(t0 + 6000ms));
  auto t = t0 + 6000ms;
  for (auto gap : {8000ms, 16000ms, 30000ms, 30000ms}) {
    looks.found_nothing(t);
    CHECK_FALSE(looks.due(t + gap - 1ms));
    CHECK(looks.due(t + gap));
    t += gap;
  }
  looks.shown();
  CHECK(looks.due(t));
  looks.found_nothing(t);
  CHECK_FALSE(looks.due(t + 1999ms));
  CHECK(looks.due(t + 2000ms));
  ElsewhereLooks slow(60000ms);  // a watch slower than the cap still asks every redraw
  slow.found_nothing(t0);
  slow.found_nothing(t0 + 60000ms);
  CHECK(slow.due(t0 + 120000ms));
}

TEST_CASE("the watch screen says where a run whose nodes all left went",
          "[unit][launcher][status]") {
  StatusQuery query;
  query.endpoint = "node1:29400";
  proto::StatusReply reply{29400, {}};
  reply.moved_runs.push_back({"job", "node2:29400"});
  std::string screen =
      watch_screen({reply, 0, ""}, query, std::chrono::milliseconds(2000), "12:00:00", 0);
  CHECK(screen ==
        "cohort status --watch  node1:29400  every 2.0 s  12:00:00  (Ctrl-C to stop)\n\n"
        "run job moved to node2:29400\n");
  reply.moved_runs.clear();
  CHECK(watch_screen({reply, 0, ""}, query, std::chrono::milliseconds(2000), "12:00:00", 0)
            .ends_with("\n\nno runs\n"));
}
