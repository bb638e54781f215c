// Reading and writing files a worker may have replaced: a FIFO, a device or a sparse giant in
// place of a regular file costs nothing and never blocks.
#include "common/untrusted_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/support/temp_dir.hpp"

using namespace cohort;
using cohort::test::TempDir;

namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("untrusted file: a regular file is read up to the bound, from its start or its end",
          "[unit][common]") {
  TempDir dir;
  std::ofstream(dir.file("f")) << "0123456789";
  UntrustedRead whole = read_untrusted_file(dir.file("f"), 100);
  CHECK(whole.ok);
  CHECK(whole.bytes == "0123456789");
  CHECK(whole.file_bytes == 10);
  CHECK(read_untrusted_file(dir.file("f"), 4).bytes == "0123");
  CHECK(read_untrusted_file_tail(dir.file("f"), 4).bytes == "6789");
  CHECK(read_untrusted_file_tail(dir.file("f"), 100).bytes == "0123456789");
  UntrustedRead missing = read_untrusted_file(dir.file("none"), 100);
  CHECK_FALSE(missing.ok);
  CHECK(missing.error == "No such file or directory");
}

TEST_CASE("untrusted file: a FIFO, a device or a directory is refused without blocking",
          "[unit][common]") {
  TempDir dir;
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0644) == 0);  // no writer: a plain open would block
  UntrustedRead fifo = read_untrusted_file(dir.file("fifo"), 100);
  CHECK_FALSE(fifo.ok);
  CHECK(fifo.error == "not a regular file (a FIFO)");
  CHECK_FALSE(read_untrusted_file_tail(dir.file("fifo"), 100).ok);
  UntrustedRead zero = read_untrusted_file("/dev/zero", 100);  // endless
  CHECK_FALSE(zero.ok);
  CHECK(zero.error == "not a regular file (a character device)");
  CHECK(read_untrusted_file(dir.path(), 100).error == "not a regular file (a directory)");
  // Writing: no reader, so a plain open for writing would block too.
  CHECK(open_untrusted_for_writing(dir.file("fifo"), O_APPEND) == -1);
  CHECK_FALSE(write_untrusted_file(dir.file("fifo"), "x", O_APPEND));
}

TEST_CASE("untrusted file: the end of a sparse giant is read without reading the rest",
          "[unit][common]") {
  TempDir dir;
  {
    std::ofstream out(dir.file("sparse"));
    out << "first line\n";
  }
  REQUIRE(::truncate(dir.file("sparse").c_str(), off_t{1} << 40) == 0);  // a terabyte, a hole
  {
    std::ofstream out(dir.file("sparse"), std::ios::app);
    out << "\nthe last line\n";
  }
  UntrustedRead tail = read_untrusted_file_tail(dir.file("sparse"), 4096);
  REQUIRE(tail.ok);
  CHECK(tail.bytes.size() == 4096);
  CHECK(tail.file_bytes == (size_t{1} << 40) + 15);
  CHECK(tail.bytes.substr(4096 - 15) == "\nthe last line\n");
  CHECK(read_untrusted_file(dir.file("sparse"), 11).bytes == "first line\n");
}

TEST_CASE("untrusted file: writing creates, appends to or replaces a regular file",
          "[unit][common]") {
  TempDir dir;
  CHECK(write_untrusted_file(dir.file("w"), "one\n", O_APPEND));
  CHECK(write_untrusted_file(dir.file("w"), "two\n", O_APPEND));
  CHECK(contents(dir.file("w")) == "one\ntwo\n");
  CHECK(write_untrusted_file(dir.file("w"), "three\n", O_TRUNC));
  CHECK(contents(dir.file("w")) == "three\n");
  int fd = open_untrusted_for_writing(dir.file("w"), O_APPEND);
  REQUIRE(fd >= 0);
  CHECK((::fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);  // a worker's stdout must not see EAGAIN
  CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  ::close(fd);
}
