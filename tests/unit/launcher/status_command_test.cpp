#include <catch2/catch.hpp>
#include <sstream>

#include "launcher/status_command.hpp"

using namespace cohort;

TEST_CASE("cohort status prints one line per run and one per node", "[unit][launcher]") {
  proto::StatusRun running{"alpha", "running", 0, 1, 3, 1, 2, 38517, {}};
  running.nodes.push_back({"127.0.0.2:3895:59458#0", "127.0.0.2", "member", 0, 2, false});
  running.nodes.push_back({"127.0.0.4:3897:1#0", "127.0.0.4", "member", 1, 1, true});
  proto::StatusRun forming{"beta", "forming", -1, 0, 0, 2, 2, 0, {}};
  forming.nodes.push_back({"127.0.0.3:3896:66931#0", "127.0.0.3", "joining", -1, 1, false});
  std::ostringstream out;
  print_status_table(proto::StatusReply{36035, {running, forming}}, out);
  CHECK(out.str() ==
        "run alpha: running, round 0, restarts 1/3, nodes 1:2, worker store port 38517\n"
        "  127.0.0.2  member  rank 0  workers 2  (127.0.0.2:3895:59458#0)\n"
        "  127.0.0.4  member  rank 1  workers 1  done  (127.0.0.4:3897:1#0)\n"
        "run beta: forming, round -1, restarts 0/0, nodes 2:2, worker store port 0\n"
        "  127.0.0.3  joining  workers 1  (127.0.0.3:3896:66931#0)\n");
}

TEST_CASE("cohort status says when the daemon has no runs", "[unit][launcher]") {
  std::ostringstream out;
  print_status_table(proto::StatusReply{29400, {}}, out);
  CHECK(out.str() == "no runs\n");
}
