#include "launcher/options/log_dir_check.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.hpp"

using namespace cohort;
using cohort::test::TempDir;

namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

size_t entries(const std::string& dir) {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(dir),
                                           std::filesystem::directory_iterator()));
}

}  // namespace

TEST_CASE("a writable --log-dir is created and left without the probe", "[unit][launcher]") {
  TempDir dir;
  std::string logs = dir.file("a/b/logs");
  CHECK(log_dir_problem(logs) == "");
  CHECK(std::filesystem::is_directory(logs));
  CHECK(entries(logs) == 0);
}

TEST_CASE("no --log-dir, or /dev/null, needs nothing", "[unit][launcher]") {
  CHECK(log_dir_problem("") == "");
  CHECK(log_dir_problem("/dev/null") == "");
}

TEST_CASE("a --log-dir that cannot take files is named", "[unit][launcher]") {
  TempDir dir;
  std::ofstream(dir.file("plain")) << "x";
  std::string problem = log_dir_problem(dir.file("plain/logs"));
  CHECK(starts_with(problem, "--log-dir " + dir.file("plain/logs") + ": cannot create it"));
  CHECK(starts_with(log_dir_problem(dir.file("plain")), "--log-dir " + dir.file("plain")));
  CHECK(starts_with(log_dir_problem("/proc/self/logs"), "--log-dir /proc/self/logs"));
}
