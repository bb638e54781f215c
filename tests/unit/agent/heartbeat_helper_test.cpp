// The header-only C++ heartbeat helper (include/cohort/heartbeat.hpp), each beat in a forked
// child: it looks its descriptor up once per process, at first use. It beats into the pipe
// COHORT_HEARTBEAT_FD names, and into nothing else that holds that number (a file a child process
// opened, having inherited the variable but not the pipe).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "include/cohort/heartbeat.hpp"
#include "tests/support/temp_dir.hpp"

using cohort::test::read_file;
using cohort::test::TempDir;

namespace {

// What beat(step) returns in a fresh process whose COHORT_HEARTBEAT_FD is `fd`.
bool beat_in_child(int fd, int64_t step) {
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::setenv("COHORT_HEARTBEAT_FD", std::to_string(fd).c_str(), 1);
    ::_exit(cohort::heartbeat::beat(step) ? 10 : 11);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE((WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 11));
  return WEXITSTATUS(status) == 10;
}

}  // namespace

TEST_CASE("the C++ heartbeat helper beats into the pipe it was given", "[unit][agent][heartbeat]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  CHECK(beat_in_child(fds[1], 3));
  ::close(fds[1]);
  char bytes[64];
  ssize_t got = ::read(fds[0], bytes, sizeof bytes);
  ::close(fds[0]);
  REQUIRE(got > 0);
  CHECK(std::string(bytes, static_cast<size_t>(got)) == "step 3\n");
}

TEST_CASE("the C++ heartbeat helper writes nothing into a file that has the heartbeat's number",
          "[unit][agent][heartbeat]") {
  TempDir dir;
  std::string results = dir.file("results");
  int fd = ::open(results.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "results\n", 8) == 8);
  CHECK_FALSE(beat_in_child(fd, 7));
  ::close(fd);
  CHECK(read_file(results) == "results\n");
}

TEST_CASE("the C++ heartbeat helper does nothing when the heartbeat's number is not open",
          "[unit][agent][heartbeat]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::close(fds[0]);
  ::close(fds[1]);  // a number just freed: nothing holds it
  CHECK_FALSE(beat_in_child(fds[1], 1));
}
