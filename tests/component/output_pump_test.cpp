#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <optional>
#include <thread>

#include "common/console.hpp"
#include "process/output_pump.hpp"
#include "tests/support/temp_dir.hpp"

using namespace cohort;

namespace {

struct PumpRun {
  std::string console;
  std::string file;
  std::deque<std::string> tail;
};

// Writes `chunks` into a pipe from another thread, with the pump reading it on an io_context;
// the log file is a fresh one, or `log_path` (not read back).
PumpRun pump_chunks(const std::vector<std::string>& chunks, const std::string& prefix,
                    const std::string& log_path = {}) {
  test::TempDir dir;
  int console_fd = ::open(dir.file("console").c_str(), O_WRONLY | O_CREAT, 0644);
  std::string log = log_path.empty() ? dir.file("log") : log_path;
  int file_fd = ::open(log.c_str(), O_WRONLY | O_CREAT, 0644);
  REQUIRE(file_fd >= 0);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  boost::asio::io_context io;
  auto pump = std::make_shared<OutputPump>(io, fds[0], PumpTarget{console_fd, file_fd, prefix});
  bool eof = false;
  pump->start([&] { eof = true; });
  std::thread writer([&] {
    for (const auto& chunk : chunks) write_all(fds[1], chunk);
    ::close(fds[1]);
  });
  io.run();
  writer.join();
  CHECK(console::drain(std::chrono::seconds(5)));
  ::close(console_fd);
  ::close(file_fd);
  CHECK(eof);
  return {test::read_file(dir.file("console")),
          log_path.empty() ? test::read_file(log) : std::string(), pump->tail()};
}

std::vector<std::string> test_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  return lines;
}

}  // namespace

TEST_CASE("lines are prefixed on the console and plain in the file", "[component][agent]") {
  PumpRun run = pump_chunks({"hel", "lo\nwor", "ld\n", "\n"}, "[default0]:");
  CHECK(run.console == "[default0]:hello\n[default0]:world\n[default0]:\n");
  CHECK(run.file == "hello\nworld\n\n");
  CHECK(run.tail.size() == 3);
}

TEST_CASE("a last line without newline is flushed at end of file", "[component][agent]") {
  PumpRun run = pump_chunks({"a\nno newline"}, "> ");
  CHECK(run.console == "> a\n> no newline\n");
  CHECK(run.file == "a\nno newline");  // the file keeps the bytes as written (no '\n' added)
}

TEST_CASE("one byte at a time still gives whole lines", "[component][agent]") {
  std::string text = "first line\nsecond line\n";
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  CHECK(pump_chunks(bytes, "|").console == "|first line\n|second line\n");
}

TEST_CASE("a line over the line limit reaches the console and the file whole",
          "[component][agent]") {
  // It goes out in pieces as it comes (the pump holds at most the limit): one prefix, one end.
  std::string huge(3 * OutputPump::kMaxLineBytes + 10, 'x');
  PumpRun run = pump_chunks({huge, "\nnext\n"}, "P:");
  CHECK(run.console == "P:" + huge + "\nP:next\n");
  CHECK(run.file == huge + "\nnext\n");
  // Without its end at the end of the stream, it is ended there, as a short one is.
  CHECK(pump_chunks({huge}, "P:").console == "P:" + huge + "\n");
  // Pieces that end right at the limit, then the end of the stream: one end, no empty line.
  std::string exact(OutputPump::kMaxLineBytes, 'z');
  CHECK(pump_chunks({exact}, "P:").console == "P:" + exact + "\n");
}

TEST_CASE("a long line arriving in pieces loses and repeats nothing", "[component][agent]") {
  // 40 KiB at a time, so that the limit falls inside a piece.
  std::vector<std::string> pieces(5, std::string(40 * 1024, 'y'));
  pieces.push_back("\n");
  PumpRun run = pump_chunks(pieces, "P:");
  CHECK(run.file == std::string(5 * 40 * 1024, 'y') + "\n");
  CHECK(run.console == "P:" + std::string(5 * 40 * 1024, 'y') + "\n");
}

TEST_CASE("the tail keeps the last lines", "[component][agent]") {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "line " + std::to_string(i) + "\n";
  PumpRun run = pump_chunks({text}, "");
  REQUIRE(run.tail.size() == OutputPump::kTailLines);
  CHECK(run.tail.back() == "line 49");
  CHECK(run.tail.front() == "line 30");
}

TEST_CASE("a log file that cannot be written (a full disk) leaves the console whole",
          "[component][agent]") {
  std::vector<std::string> chunks(200, std::string(1000, 'x') + "\n");
  PumpRun run = pump_chunks(chunks, "> ", "/dev/full");  // every write: ENOSPC
  CHECK(test_lines(run.console).size() == 200);
  CHECK(run.tail.size() == OutputPump::kTailLines);
}

namespace {

// A held pump with a ready prefix, fed `text`; `on_ready` gets the pump and the rest of the
// ready line. Returns the console.
std::string pump_held(const std::string& text,
                      const std::function<void(OutputPump&, std::string_view)>& on_ready) {
  test::TempDir dir;
  int console_fd = ::open(dir.file("console").c_str(), O_WRONLY | O_CREAT, 0644);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  boost::asio::io_context io;
  PumpTarget target{console_fd, -1, "> "};
  target.held = true;
  target.ready_prefix = "cohort-ready ";
  std::shared_ptr<OutputPump> pump;
  target.on_ready = [&](std::string_view rest) { on_ready(*pump, rest); };
  pump = std::make_shared<OutputPump>(io, fds[0], target);
  pump->start([] {});
  std::thread writer([&] {
    write_all(fds[1], text);
    ::close(fds[1]);
  });
  io.run();
  writer.join();
  CHECK(console::drain(std::chrono::seconds(5)));
  ::close(console_fd);
  return test::read_file(dir.file("console"));
}

}  // namespace

TEST_CASE("a held pump hands over its ready line and shows its lines only once released",
          "[component][agent]") {
  std::string ready;
  std::string console = pump_held("banner\n0: cohort-ready v1 (x)\nafter\ncohort-ready again\n",
                                  [&](OutputPump& pump, std::string_view rest) {
                                    ready = rest;
                                    pump.release();
                                  });
  CHECK(ready == "v1 (x)");
  CHECK(console == "> banner\n> after\n> cohort-ready again\n");  // the first ready line only
}

TEST_CASE("a held pump that is never released shows nothing and a dropped one forgets what comes",
          "[component][agent]") {
  std::string text =
      "banner\n" + std::string(OutputPump::kMaxHeldBytes, 'x') + "\ncohort-ready v\n";
  CHECK(pump_held(text, [](OutputPump&, std::string_view) {}).empty());
  CHECK(pump_held(text + "later\n", [](OutputPump& pump, std::string_view) {
          pump.drop_held();
          pump.release();
        }).empty());
  // Held past kMaxHeldBytes, the lines that do not fit are left out, not the ones before them.
  CHECK(pump_held(text + "later\n", [](OutputPump& pump, std::string_view) { pump.release(); }) ==
        "> banner\n> later\n");
}

namespace {

// One write into the worker's pipe, then how long the worker stays silent, then what the
// console must come to hold before the next write (nothing: do not wait).
struct Step {
  std::string write;
  std::chrono::milliseconds pause{0};
  std::optional<std::string> console_after;
};

struct LiveRun {
  std::string console;
  std::string file;
  std::deque<std::string> tail;
  std::vector<std::string> missed;  ///< each console_after that did not come within 3 s
};

// Feeds `steps` into a pump for `target` (its console and file fds made here), from another
// thread that waits, after each write, for the console to show what it must: a piece of a line
// has to reach the console while its worker waits, not when the line ends.
LiveRun pump_live(PumpTarget target, const std::vector<Step>& steps) {
  test::TempDir dir;
  target.console_fd = ::open(dir.file("console").c_str(), O_WRONLY | O_CREAT, 0644);
  target.file_fd = ::open(dir.file("log").c_str(), O_WRONLY | O_CREAT, 0644);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  boost::asio::io_context io;
  auto pump = std::make_shared<OutputPump>(io, fds[0], target);
  pump->start([] {});
  LiveRun run;
  std::thread writer([&] {
    for (const Step& step : steps) {
      write_all(fds[1], step.write);
      std::this_thread::sleep_for(step.pause);
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (step.console_after && test::read_file(dir.file("console")) != *step.console_after) {
        if (std::chrono::steady_clock::now() > deadline) {
          run.missed.push_back(*step.console_after);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    ::close(fds[1]);
  });
  io.run();
  writer.join();
  CHECK(console::drain(std::chrono::seconds(5)));
  ::close(target.console_fd);
  ::close(target.file_fd);
  run.console = test::read_file(dir.file("console"));
  run.file = test::read_file(dir.file("log"));
  run.tail = pump->tail();
  return run;
}

}  // namespace

TEST_CASE("progress bar redraws and a waiting line start reach the console live and prefixed once",
          "[component][agent]") {
  PumpTarget target;
  target.prefix = "[default0]:";
  std::string bar = "[default0]:progress 0%\r[default0]:progress 50%\r";
  LiveRun run = pump_live(target, {{"\rprogress 0%", {}, "[default0]:progress 0%"},
                                   {"\rprogress 50%", {}, bar.substr(0, bar.size() - 1)},
                                   {"\rprogress 100%\nepoch 1: "},
                                   {"", {}, bar + "[default0]:progress 100%\n[default0]:epoch 1: "},
                                   {"done\n"}});
  CHECK(run.missed.empty());
  CHECK(run.console == bar + "[default0]:progress 100%\n[default0]:epoch 1: done\n");
  CHECK(run.file == "\rprogress 0%\rprogress 50%\rprogress 100%\nepoch 1: done\n");
  // The redraws take one place in the failure summary's tail: the last.
  CHECK(run.tail == std::deque<std::string>{"progress 100%", "epoch 1: done"});
}

TEST_CASE("a last redraw stays in sight at end of file and \\r\\n ends one line",
          "[component][agent]") {
  PumpTarget target;
  target.prefix = "> ";
  LiveRun run = pump_live(target, {{"a\r\nb\r"}, {"\n\r\nx 10%\r"}});
  CHECK(run.console == "> a\r\n> b\r\n> \n> x 10%\r\n");
  CHECK(run.file == "a\r\nb\r\n\r\nx 10%\r");
  CHECK(run.tail == std::deque<std::string>{"a", "b", "", "x 10%"});
}

TEST_CASE("cohort launch's pumps relay a host's redraws live and its lines whole",
          "[component][agent]") {
  PumpTarget target;
  target.prefix = "[n1]: ";
  target.prefixed_marker = "[n1:";
  auto idle = 3 * OutputPump::kIdleFlush;
  // A line's start waits for its end: it may only be stalled on its way from the host.
  LiveRun run = pump_live(target, {{"[n1:0]:10%\r[n1:0]:epoch 1: ", idle, "[n1:0]:10%\r"},
                                   {"done\nbare ", idle, "[n1:0]:10%\r[n1:0]:epoch 1: done\n"},
                                   {"end\n"}});
  CHECK(run.missed.empty());
  CHECK(run.console == "[n1:0]:10%\r[n1:0]:epoch 1: done\n[n1]: bare end\n");
}

TEST_CASE("a launched agent's ready line is never shown even when it comes slowly",
          "[component][agent]") {
  PumpTarget target;
  target.prefix = "> ";
  target.ready_prefix = "cohort-ready ";
  std::string ready;
  target.on_ready = [&](std::string_view rest) { ready = rest; };
  LiveRun run = pump_live(
      target, {{"banner\ncohort-re", 3 * OutputPump::kIdleFlush, "> banner\n"}, {"ady v1\nlater"}});
  CHECK(run.missed.empty());
  CHECK(ready == "v1");
  CHECK(run.console == "> banner\n> later\n");
}
