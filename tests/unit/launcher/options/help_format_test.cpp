#include "launcher/options/help_format.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

namespace {

// The parse error of `cohort status --watch VALUE`, empty when VALUE is accepted.
std::string watch_error(const char* value, const CLI::Validator& check) {
  CLI::App app("status");
  double seconds = 0;
  app.add_option("--watch", seconds)->check(check);
  const char* argv[] = {"status", "--watch", value};
  try {
    app.parse(3, argv);
  } catch (const CLI::ParseError& error) {
    return parse_error_message("cohort status", error);
  }
  return "";
}

}  // namespace

TEST_CASE("a number out of its range, or no number, is named with the range expected",
          "[unit][launcher]") {
  CLI::Validator seconds = number_within(0.2, 3600, "seconds");
  CHECK(watch_error("0.2", seconds).empty());
  CHECK(watch_error("3600", seconds).empty());
  CHECK(watch_error("0.1", seconds) ==
        "cohort status: --watch: expected seconds from 0.2 to 3600, got '0.1' "
        "(cohort status --help)\n");
  for (const char* bad : {"abc", "", "nan", "1e999", "2s", "3600.5"}) {
    INFO(bad);
    CHECK(watch_error(bad, seconds).find("expected seconds from 0.2 to 3600, got '") !=
          std::string::npos);
  }
  CLI::Validator port = whole_number_within(0, 65535, "a port");
  CHECK(watch_error("0", port).empty());
  CHECK(watch_error("65535", port).empty());
  for (const char* bad : {"65536", "-1", "1.5", "x"}) {
    INFO(bad);
    CHECK(watch_error(bad, port).find("expected a port from 0 to 65535") != std::string::npos);
  }
}

TEST_CASE("CLI11's conversion errors say what was expected", "[unit][launcher]") {
  // "cohortd: Could not convert: --threads = abc" was CLI11's own wording.
  auto error_of = [](std::vector<std::string> words) {
    CLI::App app("cohortd");
    int threads = 0;
    bool json = false;
    app.add_option("--threads", threads);
    app.add_flag("--json", json);
    std::vector<const char*> argv{"cohortd"};
    for (const std::string& word : words) argv.push_back(word.c_str());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& error) {
      return parse_error_message("cohortd", error, "", &app);
    }
    return std::string();
  };
  CHECK(error_of({"--threads", "abc"}) ==
        "cohortd: --threads: expected a number, got 'abc' (cohortd --help)\n");
  CHECK(error_of({"--threads", "1.5"}) ==
        "cohortd: --threads: expected a whole number, got '1.5' (cohortd --help)\n");
  CHECK(error_of({"--json=maybe"}) ==
        "cohortd: --json: expected true or false, got 'maybe' (cohortd --help)\n");
  CHECK(error_of({"--threads", "4"}).empty());
}
