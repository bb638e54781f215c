#include "launcher/launch/allocation.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

namespace {

// Files as the scheduler would have written them, by path.
FileReader files(std::map<std::string, std::string> contents) {
  return [contents](const std::string& path) -> std::optional<std::string> {
    auto found = contents.find(path);
    if (found == contents.end()) return std::nullopt;
    return found->second;
  };
}

const FileReader kNoFiles = files({});

std::vector<std::pair<std::string, int>> hosts(const Allocation& allocation) {
  std::vector<std::pair<std::string, int>> result;
  for (const auto& host : allocation.selection.hosts) result.emplace_back(host.name, host.slots);
  return result;
}

using Hosts = std::vector<std::pair<std::string, int>>;

}  // namespace

TEST_CASE("allocation: none outside a batch job", "[unit][allocation]") {
  CHECK_FALSE(find_allocation({{"HOME", "/root"}, {"SLURM_JOB_NODELIST", ""}}, kNoFiles));
}

TEST_CASE("allocation: Slurm's node list with the tasks of each node", "[unit][allocation]") {
  auto allocation = find_allocation(
      {{"SLURM_JOB_NODELIST", "gpu-[01-03],login1"}, {"SLURM_TASKS_PER_NODE", "4(x3),1"}},
      kNoFiles);
  REQUIRE(allocation);
  CHECK(allocation->selection.problems.empty());
  CHECK(hosts(*allocation) == Hosts{{"gpu-01", 4}, {"gpu-02", 4}, {"gpu-03", 4}, {"login1", 1}});
  CHECK(allocation->source == "the Slurm allocation (SLURM_JOB_NODELIST=gpu-[01-03],login1)");
  CHECK(allocation->scheduler == "Slurm");

  auto one_each = find_allocation({{"SLURM_NODELIST", "n[1-2]"}}, kNoFiles);
  REQUIRE(one_each);
  CHECK(hosts(*one_each) == Hosts{{"n1", 1}, {"n2", 1}});
}

TEST_CASE("allocation: Slurm task counts that do not fit the node list are refused",
          "[unit][allocation]") {
  for (const char* tasks : {"4(x3)", "4(x5)", "4,4,4,4,4", "4(x)", "4(3)", "x", "0(x4)",
                            "4(x99999999999999999999)", "4(x4", "-1(x4)"}) {
    auto allocation = find_allocation(
        {{"SLURM_JOB_NODELIST", "n[1-4]"}, {"SLURM_TASKS_PER_NODE", tasks}}, kNoFiles);
    REQUIRE(allocation);
    INFO(tasks);
    REQUIRE(allocation->selection.problems.size() == 1);
    CHECK(allocation->selection.problems[0] ==
          std::string("SLURM_TASKS_PER_NODE: '") + tasks +
              "' does not give the tasks of the 4 hosts of SLURM_JOB_NODELIST");
    CHECK(allocation->selection.hosts.empty());
  }
}

TEST_CASE("allocation: too many slots from Slurm's task counts name SLURM_TASKS_PER_NODE",
          "[unit][allocation]") {
  auto allocation = find_allocation(
      {{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "1,9000"}}, kNoFiles);
  REQUIRE(allocation);
  CHECK(allocation->selection.problems ==
        std::vector<std::string>{"SLURM_TASKS_PER_NODE: n2 has 9000 slots; 1-4096 are allowed"});
  // A bad name is still the node list's.
  auto named = find_allocation({{"SLURM_JOB_NODELIST", "n1,-x"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}},
                               kNoFiles);
  REQUIRE(named);
  CHECK(named->selection.problems ==
        std::vector<std::string>{"SLURM_JOB_NODELIST: '-x' is not a host name"});
}

TEST_CASE("allocation: a malformed Slurm node list is named", "[unit][allocation]") {
  auto allocation = find_allocation({{"SLURM_JOB_NODELIST", "n[1-"}}, kNoFiles);
  REQUIRE(allocation);
  CHECK(allocation->selection.problems ==
        std::vector<std::string>{
            "SLURM_JOB_NODELIST: 'n[1-' is not a Slurm host list of at most 16384 hosts"});
  auto huge = find_allocation({{"SLURM_JOB_NODELIST", "n[1-16385]"}}, kNoFiles);
  REQUIRE(huge);
  CHECK_FALSE(huge->selection.problems.empty());
  CHECK(huge->selection.hosts.empty());
}

TEST_CASE("allocation: PBS's node file has a line per slot", "[unit][allocation]") {
  auto allocation =
      find_allocation({{"PBS_NODEFILE", "/var/spool/pbs/aux/7.server"}},
                      files({{"/var/spool/pbs/aux/7.server", "n1\nn1\nn2\n\nn2\nn2\nn1\n"}}));
  REQUIRE(allocation);
  CHECK(allocation->selection.problems.empty());
  CHECK(hosts(*allocation) == Hosts{{"n1", 3}, {"n2", 3}});
  CHECK(allocation->source == "the PBS allocation (PBS_NODEFILE=/var/spool/pbs/aux/7.server)");
  CHECK(allocation->scheduler == "PBS");
}

TEST_CASE("allocation: an unreadable or empty PBS node file is named", "[unit][allocation]") {
  auto missing = find_allocation({{"PBS_NODEFILE", "/nowhere"}}, kNoFiles);
  REQUIRE(missing);
  CHECK(missing->selection.problems ==
        std::vector<std::string>{"PBS_NODEFILE: cannot read '/nowhere'"});
  auto empty = find_allocation({{"PBS_NODEFILE", "/f"}}, files({{"/f", "\n \n"}}));
  REQUIRE(empty);
  CHECK(empty->selection.problems == std::vector<std::string>{"PBS_NODEFILE /f: no hosts"});
}

TEST_CASE("allocation: LSF's host and slot pairs, else its host file, else its host list",
          "[unit][allocation]") {
  auto pairs = find_allocation(
      {{"LSB_MCPU_HOSTS", "hostA 4 hostB 2 hostA 1"}, {"LSB_HOSTS", "ignored"}}, kNoFiles);
  REQUIRE(pairs);
  CHECK(pairs->selection.problems.empty());
  CHECK(hosts(*pairs) == Hosts{{"hostA", 5}, {"hostB", 2}});
  CHECK(pairs->scheduler == "LSF");

  auto file = find_allocation({{"LSB_DJOB_HOSTFILE", "/h"}}, files({{"/h", "a\na\nb\n"}}));
  REQUIRE(file);
  CHECK(hosts(*file) == Hosts{{"a", 2}, {"b", 1}});

  auto list = find_allocation({{"LSB_HOSTS", "a a b b b"}}, kNoFiles);
  REQUIRE(list);
  CHECK(hosts(*list) == Hosts{{"a", 2}, {"b", 3}});
}

TEST_CASE("allocation: bad LSF pairs are named", "[unit][allocation]") {
  auto odd = find_allocation({{"LSB_MCPU_HOSTS", "hostA 4 hostB"}}, kNoFiles);
  REQUIRE(odd);
  CHECK(odd->selection.problems ==
        std::vector<std::string>{
            "LSB_MCPU_HOSTS: expected 'host slots host slots ...', got an odd number of words"});
  auto word = find_allocation({{"LSB_MCPU_HOSTS", "hostA four"}}, kNoFiles);
  REQUIRE(word);
  CHECK(word->selection.problems ==
        std::vector<std::string>{"LSB_MCPU_HOSTS: 'four' is not a slot count (expected 'host "
                                 "slots host slots ...')"});
}

TEST_CASE("allocation: host names are checked as a hostfile's are", "[unit][allocation]") {
  auto allocation =
      find_allocation({{"PBS_NODEFILE", "/f"}}, files({{"/f", "-oProxyCommand=touch\nn1\n"}}));
  REQUIRE(allocation);
  CHECK(allocation->selection.problems ==
        std::vector<std::string>{"PBS_NODEFILE /f: '-oProxyCommand=touch' is not a host name"});
  auto many = find_allocation({{"LSB_MCPU_HOSTS", "a 5000"}}, kNoFiles);
  REQUIRE(many);
  CHECK(many->selection.problems ==
        std::vector<std::string>{"LSB_MCPU_HOSTS: a has 5000 slots; 1-4096 are allowed"});
}

TEST_CASE("allocation: Slurm comes before PBS and PBS before LSF", "[unit][allocation]") {
  EnvVars env{{"SLURM_JOB_NODELIST", "s1"}, {"PBS_NODEFILE", "/f"}, {"LSB_HOSTS", "l1"}};
  FileReader read = files({{"/f", "p1\n"}});
  CHECK(hosts(*find_allocation(env, read)) == Hosts{{"s1", 1}});
  env.erase("SLURM_JOB_NODELIST");
  CHECK(hosts(*find_allocation(env, read)) == Hosts{{"p1", 1}});
  env.erase("PBS_NODEFILE");
  CHECK(hosts(*find_allocation(env, read)) == Hosts{{"l1", 1}});
}
