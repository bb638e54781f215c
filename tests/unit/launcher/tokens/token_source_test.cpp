#include "launcher/tokens/token_source.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/support/temp_dir.hpp"

using namespace cohort;

namespace {

std::string write_secret(const test::TempDir& dir, const std::string& text, mode_t mode) {
  std::string path = dir.file("token");
  std::ofstream(path, std::ios::trunc) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

}  // namespace

TEST_CASE("a token file readable only by its owner gives the token", "[unit][launcher][auth]") {
  test::TempDir dir;
  std::string path = write_secret(dir, "0123456789abcdef0123\n", 0600);
  TokenResult result = load_token(path, {{"COHORT_TOKEN", "ignored-when-a-file-is-given"}});
  CHECK(result.error.empty());
  CHECK(result.token == "0123456789abcdef0123");
}

TEST_CASE("token sources that protect nothing are errors naming the source",
          "[unit][launcher][auth]") {
  test::TempDir dir;
  std::string shared = write_secret(dir, "0123456789abcdef0123", 0644);
  CHECK(load_token(shared, {}).error ==
        "--token-file " + shared + ": readable by others than its owner (chmod 600 it)");
  std::string short_one = write_secret(dir, "short\n", 0600);
  CHECK(load_token(short_one, {}).error ==
        "--token-file " + short_one + ": the token has 5 bytes; at least 16 are needed");
  CHECK(load_token(dir.file("missing"), {}).error.find("No such file") != std::string::npos);
  CHECK(load_token(dir.path(), {}).error.find("not a regular file") != std::string::npos);
  CHECK(load_token("", {{"COHORT_TOKEN", "abc"}}).error ==
        "COHORT_TOKEN: the token has 3 bytes; at least 16 are needed");
}

TEST_CASE("without a file or COHORT_TOKEN there is no token", "[unit][launcher][auth]") {
  TokenResult result = load_token("", {{"HOME", "/root"}});
  CHECK(result.token.empty());
  CHECK(result.error.empty());
  CHECK(load_token("", {{"COHORT_TOKEN", std::string(40, 'k')}}).token == std::string(40, 'k'));
}
