#include "agent/error_file.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.hpp"

using namespace cohort;

namespace {

WorkerFailure failure_with_file(const test::TempDir& dir, const std::string& timestamp) {
  WorkerFailure failure;
  failure.error_file = dir.file("error.json");
  std::ofstream(failure.error_file)
      << R"({"message": {"message": "ValueError: bad", )"
      << R"("extraInfo": {"py_callstack": "tb", "timestamp": )" << timestamp << "}}}";
  load_error_file(failure);
  return failure;
}

}  // namespace

TEST_CASE("an error file's timestamp is read when a clock can hold it", "[unit][agent]") {
  test::TempDir dir;
  WorkerFailure failure = failure_with_file(dir, R"("1700000000")");
  CHECK(failure.error_file_written);
  CHECK(failure.error_message == "ValueError: bad");
  CHECK(failure.traceback == "tb");
  CHECK(std::chrono::system_clock::to_time_t(failure.time) == 1700000000);
  // A worker may write anything: these keep the message and leave the time unset.
  for (const char* bad : {R"("1e300")", R"("-1e300")", "1e300", R"("nan")", R"("inf")"}) {
    INFO(bad);
    WorkerFailure odd = failure_with_file(dir, bad);
    CHECK(odd.error_message == "ValueError: bad");
    CHECK(odd.time == std::chrono::system_clock::time_point());
  }
}

TEST_CASE("an error file nested a million levels deep is ignored, not a crash", "[unit][agent]") {
  test::TempDir dir;
  WorkerFailure failure;
  failure.error_file = dir.file("error.json");
  std::ofstream(failure.error_file)
      << R"({"message": )" << std::string(1000000, '[') << std::string(1000000, ']') << "}";
  load_error_file(failure);
  CHECK_FALSE(failure.error_file_written);
  CHECK(failure.error_message.empty());
}

TEST_CASE("the root cause file carries errorCode in its message as torchrun writes it",
          "[unit][agent]") {
  test::TempDir dir;
  auto written = [&](const WorkerFailure& failure) {
    REQUIRE(write_root_cause_file(dir.file("root.json"), failure));
    std::ifstream in(dir.file("root.json"));
    return nlohmann::json::parse(in);
  };
  WorkerFailure raised = failure_with_file(dir, R"("1700000000")");
  raised.status = ExitStatus::exited(1);
  nlohmann::json document = written(raised);
  CHECK(document["message"]["errorCode"] == 1);
  CHECK(document["message"]["message"] == "ValueError: bad");
  CHECK_FALSE(document.contains("errorCode"));

  WorkerFailure killed;  // wrote no error file: one is made, with minus the signal
  killed.rank = 2;
  killed.status = ExitStatus::killed_by(9);
  document = written(killed);
  CHECK(document["message"]["errorCode"] == -9);
  CHECK(document["message"]["message"].get<std::string>().starts_with("worker rank 2 failed"));

  WorkerFailure plain;  // torchrun leaves a message that is a string as it is
  plain.error_file = dir.file("plain.json");
  std::ofstream(plain.error_file) << R"({"message": "out of memory"})";
  plain.status = ExitStatus::exited(1);
  document = written(plain);
  CHECK(document == nlohmann::json{{"message", "out of memory"}});
}
