// The console queue with a console that stops reading: a pipe the test leaves unread, then
// drains. Worker output waits (its pump stops reading) and arrives whole and in order; the io
// thread stays free meanwhile; cohort's own messages past the bound are dropped and counted.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "common/console.hpp"
#include "process/output_pump.hpp"
#include "tests/support/wait_until.hpp"

using namespace cohort;
using cohort::test::wait_until;
using namespace std::chrono_literals;

namespace {

struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    read = fds[0];
    write = fds[1];
  }
  ~Pipe() {
    if (read >= 0) ::close(read);
    if (write >= 0) ::close(write);
  }
};

// Reads `fd` on a thread of its own until `done` says the text is complete or 30 s pass.
class Reader {
 public:
  Reader(int fd, std::function<bool(const std::string&)> done)
      : thread_([this, fd, done = std::move(done)] {
          auto deadline = std::chrono::steady_clock::now() + 30s;
          char buffer[65536];
          fcntl(fd, F_SETFL, O_NONBLOCK);
          while (!done(text_) && std::chrono::steady_clock::now() < deadline) {
            ssize_t got = ::read(fd, buffer, sizeof buffer);
            if (got > 0) {
              text_.append(buffer, static_cast<size_t>(got));
            } else if (got == 0) {
              break;
            } else {
              std::this_thread::sleep_for(1ms);
            }
          }
        }) {}
  std::string join() {
    thread_.join();
    return text_;
  }

 private:
  std::string text_;
  std::thread thread_;
};

std::string numbered_lines(int count, const std::string& prefix) {
  std::string text;
  for (int i = 0; i < count; ++i) text += prefix + "line " + std::to_string(i) + "\n";
  return text;
}

}  // namespace

TEST_CASE("a console that does not read pauses the pump and leaves the io thread free",
          "[component][agent]") {
  Pipe console, worker;
  boost::asio::io_context io;
  auto pump = std::make_shared<OutputPump>(io, worker.read, PumpTarget{console.write, -1, "> "});
  worker.read = -1;  // the pump's now
  bool eof = false;
  pump->start([&] { eof = true; });
  const int lines = 400'000;  // 4.6 MB: more than the pipes and the queue hold together
  const std::string written = numbered_lines(lines, "");
  std::thread writer([&] {
    write_all(worker.write, written);
    ::close(worker.write);
    worker.write = -1;
  });

  // Nobody reads the console for a second: a timer on the io thread must keep its pace.
  int ticks = 0;
  size_t most_queued = 0;
  boost::asio::steady_timer timer(io);
  std::function<void()> tick = [&] {
    ++ticks;
    most_queued = std::max(most_queued, console::queued_bytes());
    timer.expires_after(10ms);
    timer.async_wait([&](const boost::system::error_code& error) {
      if (!error) tick();
    });
  };
  tick();
  io.run_for(1s);
  // At 10 ms each, 100 on an idle machine; a blocked io thread would give one. Loose enough for
  // a TSan build on a loaded machine (28 seen with two other builds beside it).
  CHECK(ticks >= 10);
  CHECK_FALSE(eof);
  CHECK(most_queued > 0);
  CHECK(most_queued <= console::kPaceBytes + 2 * 128 * 1024);  // one read's lines past the pace

  // The console reads again: everything arrives, whole and in order.
  std::string expected = numbered_lines(lines, "> ");
  Reader reader(console.read,
                [&](const std::string& text) { return text.size() >= expected.size(); });
  timer.cancel();
  io.restart();
  REQUIRE(wait_until(
      [&] {
        io.run_for(10ms);
        return eof;
      },
      30s));
  CHECK(console::drain(5s));
  writer.join();
  std::string shown = reader.join();
  CHECK(shown.size() == expected.size());
  CHECK(shown == expected);
}

TEST_CASE("cohort's messages past the bound are dropped and counted once the console reads",
          "[component][agent]") {
  Pipe console;
  const std::string message(1000, 'm');
  const int sent = static_cast<int>(console::kMaxQueuedBytes / 1000) + 2000;
  for (int i = 0; i < sent; ++i) console::write_message(console.write, message + "\n");
  CHECK(console::queued_bytes() <= console::kMaxQueuedBytes);
  CHECK_FALSE(console::drain(100ms));

  Reader reader(console.read, [](const std::string& text) {
    std::string_view end = "messages were dropped\n";  // the last line
    return text.size() >= end.size() &&
           text.compare(text.size() - end.size(), end.size(), end) == 0;
  });
  CHECK(console::drain(10s));
  std::string shown = reader.join();
  int arrived = static_cast<int>(std::count(shown.begin(), shown.end(), 'm') / 1000);
  int dropped = 0;
  size_t at = shown.find("for a while: ");
  REQUIRE(at != std::string::npos);
  dropped = std::atoi(shown.c_str() + at + 13);
  CHECK(dropped >= 1000);  // 2,000 past the bound, less what the pipe itself holds
  CHECK(arrived + dropped == sent);
}

// The group keeper is forked from the agent without exec: its messages must not wait behind the
// agent's queue, nor for the agent's writer thread, which a fork does not copy.
TEST_CASE("a child forked without exec writes its own messages", "[component][agent]") {
#if defined(__SANITIZE_THREAD__)
  WARN("not under TSan: it ends a child that starts a thread after a multi-threaded fork");
  return;
#endif
  Pipe stuck;  // the parent's console, not read: its writer thread waits in write(2)
  console::write_output(stuck.write, std::string(256 * 1024, 'p'));
  REQUIRE(wait_until([] { return console::queued_bytes() > 0; }));
  Pipe child_console;
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    console::write_message(child_console.write, "from the child\n");
    ::_exit(console::drain(5s) && console::queued_bytes() == 0 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  ::close(child_console.write);
  child_console.write = -1;
  Reader reader(child_console.read, [](const std::string&) { return false; });  // to end of file
  CHECK(reader.join() == "from the child\n");
  Reader parent(stuck.read, [](const std::string& text) { return text.size() == 256 * 1024; });
  CHECK(console::drain(10s));
  CHECK(parent.join().size() == 256 * 1024);
}
