#include "agent/log_layout.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.hpp"

using namespace cohort;

namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

}  // namespace

TEST_CASE("each agent's logs get a directory of their own under --log-dir", "[unit][agent]") {
  test::TempDir dir;
  std::string base = dir.file("shared/logs");  // created as needed
  LogLayout first(base, "job-7");
  LogLayout second(base, "job-7");  // another node on a shared filesystem, or a later run
  CHECK(starts_with(first.run_dir(), base + "/job-7_"));
  CHECK(starts_with(second.run_dir(), base + "/job-7_"));
  CHECK(first.run_dir() != second.run_dir());
  CHECK(first.run_dir().size() == (base + "/job-7_").size() + 6);
  REQUIRE(first.prepare_attempt(0, 2) == "");
  CHECK(std::filesystem::is_directory(first.run_dir() + "/attempt_0/1"));
  CHECK(first.error_file(0, 1) == first.run_dir() + "/attempt_0/1/error.json");
  CHECK(second.error_file(0, 1) != first.error_file(0, 1));
  CHECK_FALSE(first.temporary());
}

TEST_CASE("a relative --log-dir becomes absolute: a worker that changes directory finds its files",
          "[unit][agent]") {
  test::TempDir dir;
  std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  LogLayout layout("./rel/logs/", "job");
  std::filesystem::current_path(before);
  std::string base = (std::filesystem::path(dir.path()) / "rel/logs").lexically_normal().string();
  CHECK(layout.base_dir() == base);
  CHECK(starts_with(layout.run_dir(), base + "/job_"));
  REQUIRE(layout.prepare_attempt(0, 1) == "");
  CHECK(starts_with(layout.error_file(0, 0), base + "/job_"));
}

TEST_CASE("an attempt number that comes again starts from an empty directory", "[unit][agent]") {
  test::TempDir dir;
  LogLayout logs(dir.path(), "job");
  REQUIRE(logs.prepare_attempt(3, 1) == "");
  std::ofstream(logs.error_file(3, 0)) << "{\"message\": \"the last time's error\"}";
  std::ofstream(logs.attempt_dir(3) + "/hang-rank0.txt") << "stacks";
  REQUIRE(logs.prepare_attempt(3, 1) == "");
  CHECK_FALSE(std::filesystem::exists(logs.error_file(3, 0)));
  CHECK_FALSE(std::filesystem::exists(logs.attempt_dir(3) + "/hang-rank0.txt"));
  CHECK(std::filesystem::is_directory(logs.rank_dir(3, 0)));
}

TEST_CASE("without --log-dir the logs live in a temporary directory removed with them",
          "[unit][agent]") {
  std::string base;
  {
    LogLayout logs("", "job");
    base = logs.base_dir();
    CHECK(logs.temporary());
    CHECK(starts_with(logs.run_dir(), base + "/job_"));
    CHECK(logs.prepare_attempt(0, 1) == "");
  }
  CHECK_FALSE(std::filesystem::exists(base));
  LogLayout off("/dev/null", "job");
  CHECK_FALSE(off.enabled());
  CHECK(off.attempt_dir(0).empty());
}

TEST_CASE("a log directory that cannot be made is said when the attempt starts", "[unit][agent]") {
  test::TempDir dir;
  std::ofstream(dir.file("plain")) << "x";
  LogLayout logs(dir.file("plain"), "job");
  CHECK(logs.run_dir().empty());
  CHECK(starts_with(logs.prepare_attempt(0, 1),
                    "cannot create a log directory in " + dir.file("plain") + ": "));
}
