// Reading /proc/<pid>/stat lines (command names with spaces and parentheses included) and finding
// the processes below some roots in a table of them: the pure halves of killing a process tree.
#include "process/process_tree.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>

using namespace cohort;

TEST_CASE("a /proc stat line gives state, parent, group, session and start time",
          "[unit][process]") {
  const char* line =
      "4242 (python3) S 4000 4242 4242 0 -1 4194560 1234 0 0 0 10 5 0 0 20 0 3 0 987654 "
      "123456789 2345 18446744073709551615 1 1 0 0 0 0 0 16781312 17642 0 0 0 17 1 0 0 0 0 0\n";
  auto stat = parse_proc_stat(line);
  REQUIRE(stat.has_value());
  CHECK(stat->pid == 4242);
  CHECK(stat->state == 'S');
  CHECK(stat->ppid == 4000);
  CHECK(stat->pgid == 4242);
  CHECK(stat->session == 4242);
  CHECK(stat->start_time == 987654);
}

TEST_CASE("a command name with spaces and parentheses does not shift the fields",
          "[unit][process]") {
  auto stat =
      parse_proc_stat("77 (a) b (c)) Z 1 70 60 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 31337 0 0 0\n");
  REQUIRE(stat.has_value());
  CHECK(stat->pid == 77);
  CHECK(stat->state == 'Z');
  CHECK(stat->ppid == 1);
  CHECK(stat->pgid == 70);
  CHECK(stat->session == 60);
  CHECK(stat->start_time == 31337);
}

TEST_CASE("what is not a stat line is refused", "[unit][process]") {
  for (const char* bad : {"", "12", "12 (x", "x (y) S 1 2 3", "12 (x) S 1 2 3 0 -1",
                          "12 (x) SS 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
                          "12 (x) S one 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
                          "12 (x) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 soon"}) {
    INFO(bad);
    CHECK_FALSE(parse_proc_stat(bad).has_value());
  }
}

TEST_CASE("this process's own stat reads back", "[unit][process]") {
  auto own = read_proc_stat(::getpid());
  REQUIRE(own.has_value());
  CHECK(own->pid == ::getpid());
  CHECK(own->ppid == ::getppid());
  CHECK(own->pgid == ::getpgrp());
  CHECK(own->start_time > 0);
  bool found = false;
  for (const ProcStat& process : scan_processes()) found = found || process.pid == ::getpid();
  CHECK(found);
}

namespace {

ProcStat process(pid_t pid, pid_t ppid) {
  ProcStat stat;
  stat.pid = pid;
  stat.ppid = ppid;
  return stat;
}

}  // namespace

TEST_CASE("descendants are everything below the roots, parents first", "[unit][process]") {
  // 100 (agent) ─┬─ 101 (keeper)
  //              ├─ 102 (worker) ── 103 ── 104
  //              └─ 105 (orphan, own session) ── 106
  // 1 ── 200 (unrelated)
  std::vector<ProcStat> table{process(104, 103), process(1, 0),     process(200, 1),
                              process(106, 105), process(101, 100), process(103, 102),
                              process(102, 100), process(105, 100), process(100, 1)};
  CHECK(descendants(table, {100}) == std::vector<pid_t>{101, 102, 105, 103, 106, 104});
  CHECK(descendants(table, {100}, 101) == std::vector<pid_t>{102, 105, 103, 106, 104});
  CHECK(descendants(table, {100}, 103) == std::vector<pid_t>{101, 102, 105, 106});
  CHECK(descendants(table, {105, 102}) == std::vector<pid_t>{106, 103, 104});
  CHECK(descendants(table, {104}).empty());
  CHECK(descendants(table, {999}).empty());
  CHECK(descendants(table, {101}, 101).empty());  // a spared root is no root
  // A root below another root is not listed again.
  CHECK(descendants(table, {102, 103}) == std::vector<pid_t>{104});
}
