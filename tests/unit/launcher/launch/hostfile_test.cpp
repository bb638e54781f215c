#include "launcher/launch/hostfile.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

namespace {

std::vector<std::string> names(const HostSelection& selection) {
  std::vector<std::string> result;
  for (const auto& host : selection.hosts) result.push_back(host.name);
  return result;
}

HostSelection four_hosts() {
  return parse_hostfile("a slots=4\nb slots=4\nc slots=2\nd slots=1\n", "hosts");
}

}  // namespace

TEST_CASE("hostfile: MPI/DeepSpeed lines, comments, blank lines, slots bounded by max_slots",
          "[unit][hostfile]") {
  HostSelection selection = parse_hostfile(
      "# the cluster\n\nnode1 slots=4   # gpus\n  node2\tslots=2 max_slots=8\nuser@node3\n",
      "hosts.txt");
  REQUIRE(selection.problems.empty());
  REQUIRE(names(selection) == std::vector<std::string>{"node1", "node2", "user@node3"});
  CHECK(selection.hosts[0].slots == 4);
  CHECK(selection.hosts[0].slots_given);
  CHECK(selection.hosts[1].slots == 2);
  CHECK(selection.hosts[2].slots == 1);
  CHECK_FALSE(selection.hosts[2].slots_given);
}

TEST_CASE("hostfile: max_slots alone gives the slots, as Open MPI reads it", "[unit][hostfile]") {
  HostSelection selection = parse_hostfile("a max_slots=8\nb slots=2 max-slots=4\n", "hf");
  REQUIRE(selection.problems.empty());
  CHECK(selection.hosts[0].slots == 8);
  CHECK(selection.hosts[0].slots_given);
  CHECK(selection.hosts[1].slots == 2);
  CHECK(parse_hostfile("a slots=4 max_slots=2\n", "hf").problems ==
        std::vector<std::string>{"hf:1: slots=4 is more than max_slots=2"});
  CHECK(parse_hostfile("a max_slots=junk\n", "hf").problems ==
        std::vector<std::string>{"hf:1: max_slots must be 1-4096, got 'junk'"});
  CHECK(parse_hostfile("a max_slots=2 max_slots=3\n", "hf").problems ==
        std::vector<std::string>{"hf:1: max_slots given twice"});
}

TEST_CASE("hostfile: spaces around '=' and a UTF-8 byte order mark are read as Open MPI does",
          "[unit][hostfile]") {
  HostSelection selection = parse_hostfile(
      "\xEF\xBB\xBF"
      "a slots = 4\nb\tslots =2 max_slots= 8\n",
      "hf");
  REQUIRE(selection.problems.empty());
  REQUIRE(names(selection) == std::vector<std::string>{"a", "b"});
  CHECK(selection.hosts[0].slots == 4);
  CHECK(selection.hosts[1].slots == 2);
  // Only the file's start may have one: elsewhere it is part of a (bad) host name.
  CHECK(parse_hostfile("a\n\xEF\xBB\xBF"
                       "b\n",
                       "hf")
            .problems.size() == 1);
}

TEST_CASE("hostfile: every bad line is reported with its number", "[unit][hostfile]") {
  HostSelection selection = parse_hostfile(
      "a slots=2\nb slots=0\na slots=1\nc slot=3\n-oProxyCommand=x\nd slots=99999\nuser@a\n", "hf");
  CHECK(selection.problems ==
        std::vector<std::string>{"hf:2: slots must be 1-4096, got '0'",
                                 "hf:3: host 'a' is already listed on line 1",
                                 "hf:4: unknown field 'slot=3' (expected slots=N)",
                                 "hf:5: '-oProxyCommand=x' is not a host name",
                                 "hf:6: slots must be 1-4096, got '99999'",
                                 "hf:7: host 'a' is already listed on line 1"});
  CHECK(parse_hostfile("# nothing\n\n", "empty").problems ==
        std::vector<std::string>{"empty: no hosts in the hostfile"});
}

TEST_CASE("flag -H lists: host:slots, slots 1 by default, duplicates and junk rejected",
          "[unit][hostfile]") {
  HostSelection selection = parse_host_list("n1:4, n2,10.0.0.3:2");
  REQUIRE(selection.problems.empty());
  REQUIRE(names(selection) == std::vector<std::string>{"n1", "n2", "10.0.0.3"});
  CHECK(selection.hosts[0].workers() == 4);
  CHECK(selection.hosts[1].workers() == 1);
  CHECK(selection.hosts[2].workers() == 2);
  CHECK(parse_host_list("n1:2,n1:2").problems ==
        std::vector<std::string>{"-H: host 'n1' is listed twice (give its slots once: n1:4)"});
  CHECK(parse_host_list("n1,u@n1").problems ==
        std::vector<std::string>{"-H: host 'u@n1' is listed twice (give its slots once: u@n1:2)"});
  CHECK(parse_host_list("/job/hostfile").problems ==
        std::vector<std::string>{
            "-H: '/job/hostfile' is not a host name (a hostfile is given with --hostfile)"});
  CHECK(parse_host_list("n1:x").problems ==
        std::vector<std::string>{"-H: slots must be 1-4096 in 'n1:x'"});
  CHECK(parse_host_list("n1,,n2").problems ==
        std::vector<std::string>{"-H: '' is not a host name"});
  CHECK(parse_host_list("n;rm").problems ==
        std::vector<std::string>{"-H: 'n;rm' is not a host name"});
  CHECK(parse_host_list("a..b").problems ==
        std::vector<std::string>{"-H: 'a..b' is not a host name"});
  CHECK(parse_host_list("-x@a").problems ==
        std::vector<std::string>{"-H: '-x@a' is not a host name"});
  CHECK(parse_hostfile("bob@fe80::1 slots=2\n10.0.0.7\nnode-1.cluster.\n", "hf").problems.empty());
}

TEST_CASE("flag --include keeps hosts and slots, filtered slots become CUDA_VISIBLE_DEVICES",
          "[unit][hostfile]") {
  HostSelection selection = four_hosts();
  filter_hosts(selection, "a:0,2@c", "");
  REQUIRE(selection.problems.empty());
  REQUIRE(names(selection) == std::vector<std::string>{"a", "c"});
  CHECK(selection.hosts[0].workers() == 2);
  CHECK(visible_devices(selection.hosts[0]) == "0,2");
  CHECK(selection.hosts[1].workers() == 2);
  CHECK(visible_devices(selection.hosts[1]).empty());
}

TEST_CASE("flag --exclude drops whole hosts or some of their slots", "[unit][hostfile]") {
  HostSelection selection = four_hosts();
  filter_hosts(selection, "", "b@a:1@c:0");
  REQUIRE(selection.problems.empty());
  REQUIRE(names(selection) == std::vector<std::string>{"a", "c", "d"});
  CHECK(visible_devices(selection.hosts[0]) == "0,2,3");
  CHECK(selection.hosts[0].workers() == 3);
  CHECK(visible_devices(selection.hosts[1]) == "1");
  CHECK(selection.hosts[2].workers() == 1);
}

TEST_CASE("flag --include/--exclude errors name the flag", "[unit][hostfile]") {
  auto problems = [](const std::string& include, const std::string& exclude) {
    HostSelection selection = four_hosts();
    filter_hosts(selection, include, exclude);
    return selection.problems;
  };
  CHECK(problems("a", "b") ==
        std::vector<std::string>{"--include, --exclude: give one of them, not both"});
  CHECK(problems("zz", "") == std::vector<std::string>{"--include: 'zz' is not one of the hosts"});
  CHECK(problems("", "c:2") == std::vector<std::string>{"--exclude: c has slots 0-1, not 2"});
  CHECK(problems("", "d:0") == std::vector<std::string>{"--exclude: leaves d without slots"});
  CHECK(problems("", "a@b@c@d") == std::vector<std::string>{"--exclude: leaves no host"});
  CHECK(problems("a:x", "") ==
        std::vector<std::string>{"--include: 'x' is not a slot number in 'a:x'"});
  CHECK(problems("@", "") ==
        std::vector<std::string>{"--include: expected host[:slot,slot]@host..., got '@'"});
  // A host named twice would keep one of its entries only: refused.
  CHECK(problems("", "c:0@c:1") ==
        std::vector<std::string>{
            "--exclude: c is named twice: name it once, with all its slots (c:0,1)"});
  CHECK(problems("a@a:1", "").size() == 1);
}

TEST_CASE("filters name hosts without their user@", "[unit][hostfile]") {
  HostSelection selection = parse_hostfile("alice@a slots=2\nb\n", "hf");
  filter_hosts(selection, "a:1", "");
  REQUIRE(selection.problems.empty());
  REQUIRE(names(selection) == std::vector<std::string>{"alice@a"});
  CHECK(visible_devices(selection.hosts[0]) == "1");
  HostSelection again = parse_hostfile("alice@a slots=2\n", "hf");
  filter_hosts(again, "alice@a:1", "");
  CHECK(again.problems ==
        std::vector<std::string>{"--include: 'alice' is not one of the hosts (name hosts without "
                                 "their user@)"});
}

TEST_CASE("hostfile: MPICH's machinefile lines give slots after a colon", "[unit][hostfile]") {
  HostSelection selection = parse_hostfile("node1:4\nnode2\nuser@node3:2\n", "mf");
  REQUIRE(selection.problems.empty());
  CHECK(names(selection) == std::vector<std::string>{"node1", "node2", "user@node3"});
  CHECK(selection.hosts[0].slots == 4);
  CHECK(selection.hosts[2].slots == 2);
  CHECK(parse_hostfile("node1:x\n", "mf").problems ==
        std::vector<std::string>{"mf:1: slots must be 1-4096, got 'x'"});
  CHECK(parse_hostfile("node1:4 slots=2\n", "mf").problems ==
        std::vector<std::string>{"mf:1: slots given twice"});
  CHECK(parse_hostfile("fe80::1 slots=2\n", "mf").problems.empty());  // IPv6: no slots suffix
}

TEST_CASE("IPv6 addresses with slots go in brackets, in -H, hostfiles and filters",
          "[unit][hostfile]") {
  HostSelection selection = parse_host_list("[fe80::1]:4,u@[fe80::2],fe80::3");
  REQUIRE(selection.problems.empty());
  REQUIRE(names(selection) == std::vector<std::string>{"fe80::1", "u@fe80::2", "fe80::3"});
  CHECK(selection.hosts[0].slots == 4);
  CHECK(selection.hosts[1].slots == 1);
  filter_hosts(selection, "", "[fe80::1]:1,3@fe80::3");
  REQUIRE(selection.problems.empty());
  REQUIRE(names(selection) == std::vector<std::string>{"fe80::1", "u@fe80::2"});
  CHECK(visible_devices(selection.hosts[0]) == "0,2");

  HostSelection file = parse_hostfile("[::1]:2\n[fe80::9] slots=3\n", "mf");
  REQUIRE(file.problems.empty());
  CHECK(names(file) == std::vector<std::string>{"::1", "fe80::9"});
  CHECK(file.hosts[0].slots == 2);
  CHECK(file.hosts[1].slots == 3);
  CHECK(parse_host_list("[fe80::1").problems ==
        std::vector<std::string>{"-H: '[fe80::1' is not a host name"});
  CHECK(parse_host_list("[fe80::1]x").problems ==
        std::vector<std::string>{"-H: '[fe80::1]x' is not a host name"});
  CHECK(parse_host_list("[node1]:2").problems.empty());
}
