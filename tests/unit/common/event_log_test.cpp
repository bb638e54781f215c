// EventLog: the line's fixed head and escaped fields, appends that survive a reopen (a daemon
// restart), torn and malformed lines skipped by readers, and a file that cannot be opened.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "common/event_log.hpp"
#include "tests/support/temp_dir.hpp"

using namespace cohort;

TEST_CASE("an event line has the fixed head, then its fields, and ends in a newline",
          "[unit][common][events]") {
  Event event{"job42", "round.started", {{"round", 3}, {"world_size", 8}}};
  std::string line = format_event_line(event, "daemon", 17, 1795460832345);
  CHECK(line ==
        "{\"time\":\"2026-11-23T19:07:12.345Z\",\"t_ms\":1795460832345,\"source\":\"daemon\","
        "\"seq\":17,\"run\":\"job42\",\"event\":\"round.started\",\"round\":3,\"world_size\":8}\n");
}

// hang.attributed wrote the collective's "seq" after the line's own: a reader saw only one.
TEST_CASE("a field under an envelope key is left out so that no key comes twice",
          "[unit][common][events]") {
  Event event{"job42", "hang.attributed", {{"seq", 4120}, {"run", "other"}, {"op", "all_reduce"}}};
  std::string line = format_event_line(event, "daemon", 17, 1795460832345);
  CHECK(line ==
        "{\"time\":\"2026-11-23T19:07:12.345Z\",\"t_ms\":1795460832345,\"source\":\"daemon\","
        "\"seq\":17,\"run\":\"job42\",\"event\":\"hang.attributed\",\"op\":\"all_reduce\"}\n");
  std::vector<nlohmann::json> parsed = parse_event_lines(line);
  REQUIRE(parsed.size() == 1);
  CHECK(parsed[0]["seq"] == 17);
  CHECK(parsed[0]["run"] == "job42");
  for (const char* key : {"time", "t_ms", "source", "seq", "run", "event"})
    CHECK(is_envelope_key(key));
  CHECK_FALSE(is_envelope_key("collective_seq"));
}

TEST_CASE("an event's text cannot break its line", "[unit][common][events]") {
  Event event{"r", "worker.failed", {{"summary", "line one\nline \"two\"\x01\xff"}}};
  std::string line = format_event_line(event, "agent", 1, 0);
  CHECK(line.find('\n') == line.size() - 1);
  std::vector<nlohmann::json> parsed = parse_event_lines(line);
  REQUIRE(parsed.size() == 1);
  CHECK(parsed[0]["summary"].get<std::string>().rfind("line one\nline \"two\"\x01", 0) == 0);
  CHECK(parsed[0]["time"] == "1970-01-01T00:00:00.000Z");
}

TEST_CASE("readers skip a torn last line and malformed lines", "[unit][common][events]") {
  std::string text =
      "{\"event\":\"a\",\"seq\":1}\n"
      "not json\n"
      "[1,2]\n"
      "{\"event\":\"b\",\"seq\":2}\n"
      "{\"event\":\"c\",\"se";
  std::vector<nlohmann::json> events = parse_event_lines(text);
  REQUIRE(events.size() == 2);
  CHECK(events[0]["event"] == "a");
  CHECK(events[1]["event"] == "b");
}

TEST_CASE("an event log appends: a second writer (a restarted daemon) adds after the first",
          "[unit][common][events]") {
  test::TempDir dir;
  std::string path = dir.file("events.jsonl");
  {
    EventLog first("daemon");
    REQUIRE(first.open(path).empty());
    CHECK(first.writes());
    first.record({"r", "run.created", {}}, 1000);
    first.record({"r", "node.joined", {{"node", "n1"}}}, 1001);
  }
  {
    std::ofstream torn(path, std::ios::app);
    torn << "{\"event\":\"torn";  // a writer killed mid-line
  }
  EventLog second("daemon");
  REQUIRE(second.open(path).empty());
  second.record({"r", "run.completed", {}}, 2000);
  std::vector<nlohmann::json> events = read_event_file(path);
  // The torn text and the next line share a line: that line is malformed and skipped, but
  // every whole line before it stays readable.
  REQUIRE(events.size() == 2);
  CHECK(events[0]["event"] == "run.created");
  CHECK(events[1]["seq"] == 2);
}

TEST_CASE("lines from several processes never interleave inside a line", "[unit][common][events]") {
  test::TempDir dir;
  std::string path = dir.file("events.jsonl");
  constexpr int kWriters = 4, kLines = 500;
  std::vector<pid_t> children;
  for (int writer = 0; writer < kWriters; ++writer) {
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      EventLog log("agent");
      if (!log.open(path).empty()) ::_exit(1);
      std::string padding(2000, static_cast<char>('a' + writer));
      for (int i = 0; i < kLines; ++i) log.record({"r", "x", {{"pad", padding}}}, i);
      ::_exit(0);
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  std::vector<nlohmann::json> events = read_event_file(path);
  CHECK(events.size() == kWriters * kLines);
}

TEST_CASE("an event log that cannot be opened says why", "[unit][common][events]") {
  EventLog log("daemon");
  std::string problem = log.open("/nonexistent-dir/events.jsonl");
  CHECK(problem.find("/nonexistent-dir/events.jsonl: No such file or directory") == 0);
  CHECK_FALSE(log.writes());
  CHECK(event_log_problem("/nonexistent-dir/x") != "");
}

TEST_CASE("an event log refuses a symbolic link at its path and is created owner-only",
          "[unit][common][events]") {
  test::TempDir dir;
  std::string target = dir.file("elsewhere");
  std::string planted = dir.file("planted.jsonl");
  REQUIRE(::symlink(target.c_str(), planted.c_str()) == 0);
  EventLog log("agent");
  std::string problem = log.open(planted);
  CHECK(problem.find("is a symbolic link") != std::string::npos);
  CHECK_FALSE(log.writes());
  CHECK(event_log_problem(planted) != "");
  struct stat info {};
  CHECK(::lstat(target.c_str(), &info) != 0);  // nothing was created where it pointed

  std::string path = dir.file("events.jsonl");
  REQUIRE(log.open(path).empty());
  REQUIRE(::stat(path.c_str(), &info) == 0);
  CHECK((info.st_mode & 07777) == 0600);
}
