// The FileTimer pipe's path (TORCHELASTIC_TIMER_FILE, which the user may set): a pipe this user
// left is replaced, anything else there is refused and left as it was, before and after.
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <fstream>

#include "agent/file_timer_server.hpp"
#include "tests/support/temp_dir.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {

bool is_fifo(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 && S_ISFIFO(info.st_mode);
}

}  // namespace

TEST_CASE("FileTimer server: a regular file or a link at the pipe's path is refused, untouched",
          "[unit][agent][timer]") {
  boost::asio::io_context io;
  TempDir dir;
  std::string file = dir.file("precious.txt");
  std::ofstream(file) << "keep me";
  std::string link = dir.file("link");
  REQUIRE(::symlink(file.c_str(), link.c_str()) == 0);
  for (const std::string& path : {file, link}) {
    {
      FileTimerServer server(
          io, path, [](const ExpiredTimer&) {}, [](pid_t) { return true; });
      CHECK(server.start().find("is not a FileTimer pipe of this user") != std::string::npos);
    }  // the destructor leaves it too
    struct stat info {};
    CHECK(::lstat(path.c_str(), &info) == 0);
    CHECK(read_file(file) == "keep me");
  }
  CHECK_FALSE(is_fifo(file));
}

TEST_CASE("FileTimer server: a pipe an earlier run left is replaced, and removed at the end",
          "[unit][agent][timer]") {
  boost::asio::io_context io;
  TempDir dir;
  std::string path = dir.file("timer_pipe");
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  {
    FileTimerServer server(
        io, path, [](const ExpiredTimer&) {}, [](pid_t) { return true; });
    CHECK(server.start().empty());
    CHECK(is_fifo(path));
  }
  CHECK_FALSE(is_fifo(path));
}
