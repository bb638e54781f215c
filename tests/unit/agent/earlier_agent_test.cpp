// find_earlier_agents and same_launched_agent: which processes are a host's earlier agent of the
// same launch (and their keepers), and which are not: another host, another launch, another
// user, this agent itself and what it started, a run not under a launch.
#include "agent/earlier_agent.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

namespace {

using Line = std::vector<std::string>;

const Line kFirst{
    "/usr/bin/cohort", "run",      "--under-launch", "--rdzv-id", "launch-1", "--node-rank", "2",
    "--local-addr",    "10.0.0.3", "--no-python",    "train"};

Line started_again(const std::string& ms_ago) {
  Line line = kFirst;
  line.insert(line.begin() + 9, {"--launched-ms-ago", ms_ago});
  return line;
}

// The line of agent `agent`'s keeper.
Line keeper_of(pid_t agent) {
  return {"cohort", "__keeper", "11", std::to_string(agent), "3000", "2"};
}

Line with(Line line, size_t at, const std::string& value) {
  line.at(at) = value;
  return line;
}

}  // namespace

TEST_CASE("same_launched_agent: the same line but for --launched-ms-ago", "[unit][earlier_agent]") {
  CHECK(same_launched_agent(started_again("7069"), kFirst));
  CHECK(same_launched_agent(started_again("7069"), started_again("12000")));
  CHECK(same_launched_agent(kFirst, kFirst));
  CHECK_FALSE(same_launched_agent(started_again("7069"), with(kFirst, 4, "launch-2")));  // launch
  CHECK_FALSE(same_launched_agent(started_again("7069"), with(kFirst, 6, "1")));  // node rank
  CHECK_FALSE(same_launched_agent(started_again("7069"), with(kFirst, 10, "other.py")));
  Line outside_launch = kFirst;
  outside_launch.erase(outside_launch.begin() + 2);
  CHECK_FALSE(same_launched_agent(outside_launch, outside_launch));
  CHECK_FALSE(same_launched_agent(with(kFirst, 1, "status"), with(kFirst, 1, "status")));
}

TEST_CASE("find_earlier_agents: the earlier agent and its keeper, nothing else",
          "[unit][earlier_agent]") {
  const pid_t self = 500;
  const uid_t user = 1000;
  Line mine = started_again("7069");
  std::vector<ProcessLine> processes{
      {100, 90, user, kFirst},                          // the earlier agent (its sshd: 90)
      {101, 100, user, keeper_of(100)},                 // its keeper
      {102, 100, user, {"/usr/bin/python3", "train"}},  // its worker: not an agent
      {200, 190, user, started_again("3000")},          // a second earlier try, still here
      {300, 290, 0, kFirst},                            // the same line, another user's
      {400, 390, user, with(kFirst, 4, "launch-2")},    // another launch's agent of this host
      {self, 490, user, mine},                          // this agent
      {401, 400, user, keeper_of(400)},                 // that agent's keeper
      {501, self, user, keeper_of(self)},               // its own keeper
      {502, self, user, mine},                          // the same line below it: not an agent
  };
  EarlierAgents earlier = find_earlier_agents(processes, self, user, mine);
  CHECK(earlier.agents == std::vector<pid_t>{100, 200});
  CHECK(earlier.keepers == std::vector<pid_t>{101});
  CHECK(find_earlier_agents({processes.begin() + 4, processes.end()}, self, user, mine)
            .agents.empty());
}
