// Reading /proc/<pid>/stat lines (command names with spaces and parentheses included) and finding
// the processes below some roots in a table of them: the pure halves of killing a process tree;
// then a real tree, found through the children files and killed.
#include "process/process_tree.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

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

TEST_CASE("a live tree is found below its root, from the children files or a scan",
          "[unit][process]") {
  // This process ── child ── grandchild, both asleep until killed.
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::pause();
      ::_exit(0);
    }
    (void)!::write(pipe_fds[1], &grandchild, sizeof grandchild);
    ::pause();
    ::_exit(0);
  }
  pid_t grandchild = -1;
  REQUIRE(::read(pipe_fds[0], &grandchild, sizeof grandchild) == sizeof grandchild);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);

  std::vector<pid_t> children = children_now(::getpid());
  CHECK(std::find(children.begin(), children.end(), child) != children.end());
  CHECK(std::find(children.begin(), children.end(), grandchild) == children.end());
  CHECK(children_now(child) == std::vector<pid_t>{grandchild});
  // The kernels cohort runs on have the children files; where one lacks them, the scan answers.
  if (auto direct = read_children(child)) CHECK(*direct == std::vector<pid_t>{grandchild});
  CHECK(descendants_now({child}) == std::vector<pid_t>{grandchild});
  CHECK(descendants_now({child}, grandchild).empty());
  std::vector<pid_t> below = descendants_now({::getpid()});
  auto at_child = std::find(below.begin(), below.end(), child);
  auto at_grandchild = std::find(below.begin(), below.end(), grandchild);
  CHECK(at_child < at_grandchild);  // parents first
  CHECK(at_grandchild != below.end());

  CHECK(kill_trees({child}) == 2);
  int status = 0;
  CHECK(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(children_now(::getpid()) == std::vector<pid_t>{});  // the grandchild went to init
  CHECK(read_children(999999999).value_or(std::vector<pid_t>{}).empty());  // no such process
}
