// `cohort status --watch` in a real terminal: tmux runs it in a detached session; the test reads
// the screen with capture-pane, sees it redraw as a node is lost, and stops it with Ctrl-C; a
// signal during a fetch from a silent peer ends it at once; into a file, screens follow each other
// with no control sequence.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <csignal>
#include <regex>

#include "tests/integration/multinode_support.hpp"
#include "tests/integration/tmux_support.hpp"

using namespace cohort::test;

TEST_CASE("cohort status --watch draws the runs, redraws as a node is lost, stops on Ctrl-C",
          "[integration][status]") {
  require_prerequisite(file_exists("/usr/bin/tmux"), "tmux (scripts/setup installs it)");
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  std::vector<std::string> flags{
      "--nnodes",  "1:2",     "--nproc-per-node", "1",
      "--rdzv-id", "watched", "--rdzv-conf",      "last_call_timeout=0.5,heartbeat_timeout=2"};
  std::vector<std::string> worker{"--hang"};
  auto a = cluster.node("127.0.0.2", flags, worker);
  auto b = cluster.node("127.0.0.3", flags, worker);
  Tmux tmux(scratch);
  tmux.start_watch(cluster.endpoint(), 150);
  tmux.start_watch(cluster.endpoint(), 150, "brief", "--brief");
  std::string screen, brief;
  bool both = wait_until(
      [&] {
        screen = tmux.screen();
        brief = tmux.screen("brief");
        return contains(screen, "watched") && contains(screen, "127.0.0.2") &&
               contains(screen, "127.0.0.3") && contains(screen, "running") &&
               contains(brief, "2 of 2 nodes heard within the heartbeat timeout");
      },
      20s);
  INFO(screen << "\n" << brief << "\n" << cluster.daemon().output());
  REQUIRE(both);
  CHECK(contains(screen, "cohort status --watch  " + cluster.endpoint()));
  CHECK(contains(screen, "HEARTBEAT"));
  CHECK(std::regex_search(brief, std::regex(R"(\nwatched +running +\d+ +2 \(1:2\))")));
  CHECK_FALSE(contains(brief, "127.0.0.2"));  // counted, not listed
  CHECK_FALSE(contains(brief, "HEARTBEAT"));
  b->signal(SIGKILL);
  b->wait(5s);
  bool redrawn = wait_until(
      [&] {
        screen = tmux.screen();
        brief = tmux.screen("brief");
        return contains(screen, "lost") && !contains(screen, "127.0.0.3  ") &&
               contains(brief, "1 of 1 nodes heard");
      },
      20s);
  INFO(screen << "\n" << brief);
  CHECK(redrawn);
  for (const char* session : {"watch", "brief"}) tmux.tmux({"send-keys", "-t", session, "C-c"});
  CHECK(wait_until([&] { return !tmux.running(); }, 10s));
  CHECK(wait_until([&] { return !tmux.running("brief"); }));
  a->signal(SIGTERM);
  CHECK(a->wait(10s));
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

// A second node joining a running run makes a new round: on an 80-column --watch that is no
// failure (nothing under "last failure"), "round -1" never shows, a lost node's reason is shown
// whole on lines of its own, and `cohort status --events` reads as one-liners without JSON.
TEST_CASE("cohort status --watch at 80 columns: a scale-up is no failure, a loss reads whole",
          "[integration][status]") {
  require_prerequisite(file_exists("/usr/bin/tmux"), "tmux (scripts/setup installs it)");
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  std::vector<std::string> flags{
      "--nnodes",  "1:2",    "--nproc-per-node", "1",
      "--rdzv-id", "scaled", "--rdzv-conf",      "last_call_timeout=0.5,heartbeat_timeout=2"};
  std::vector<std::string> worker{"--hang"};
  Tmux tmux(scratch);
  tmux.start_watch(cluster.endpoint(), 80);
  auto a = cluster.node("127.0.0.2", flags, worker);
  std::string screen;
  bool alone = wait_until(
      [&] {
        screen = tmux.screen();
        return contains(screen, "scaled") && contains(screen, "running");
      },
      20s);
  INFO(screen << "\n" << cluster.daemon().output());
  REQUIRE(alone);
  auto b = cluster.node("127.0.0.3", flags, worker);
  bool both = wait_until(
      [&] {
        screen = tmux.screen();
        return contains(screen, "running   1") && contains(screen, "127.0.0.3");
      },
      20s);
  INFO(screen);
  REQUIRE(both);
  CHECK_FALSE(contains(screen, "scale-up"));
  CHECK_FALSE(contains(screen, "last failure"));
  CHECK_FALSE(contains(screen, "-1"));
  b->signal(SIGKILL);
  b->wait(5s);
  bool lost = wait_until(
      [&] {
        screen = tmux.screen();
        return contains(screen, "last failure: node 127.0.0.3 lost");
      },
      20s);
  INFO(screen);
  CHECK(lost);
  RunResult events = run_to_end(
      {kCohortBin, "status", "--rdzv-endpoint", cluster.endpoint(), "--events", "scaled"},
      ChildOptions{{}, {}, "", "/tmp", "events"}, 10s);
  INFO(events.out << events.err);
  CHECK(events.status.success());
  CHECK(contains(events.out, "round.started  round 0, 1 rank: 127.0.0.2 rank 0\n"));
  CHECK(contains(events.out, "new round after round 0: scale-up: new nodes joined"));
  // The members of round 1, by address (and host, once the node's progress reports gave it).
  CHECK(std::regex_search(events.out, std::regex(R"(127\.0\.0\.2\)? rank 0, ([^ ]+ \()?)"
                                                 R"(127\.0\.0\.3\)? rank 1)")));
  CHECK_FALSE(contains(events.out, "members="));
  CHECK_FALSE(contains(events.out, "{\""));
  tmux.tmux({"send-keys", "-t", "watch", "C-c"});
  CHECK(wait_until([&] { return !tmux.running(); }, 10s));
  a->signal(SIGTERM);
  CHECK(a->wait(10s));
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

// The daemon's answer may take the whole 5 s timeout (a peer that accepts and stays silent):
// Ctrl-C, SIGTERM or SIGHUP (its terminal closed) during that wait still ends --watch at once.
TEST_CASE("cohort status --watch stops at once on a signal while a fetch waits for a silent peer",
          "[integration][status]") {
  Scratch scratch;
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), length) == 0);
  REQUIRE(::listen(listener, 8) == 0);  // the kernel completes the handshake; nobody answers
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  int signal = GENERATE(SIGINT, SIGTERM, SIGHUP);
  ChildProcess watch({kCohortBin, "status", "--watch", "1", "--rdzv-endpoint",
                      "127.0.0.1:" + std::to_string(ntohs(address.sin_port))},
                     scratch.options());
  pollfd connected{listener, POLLIN, 0};
  REQUIRE(::poll(&connected, 1, 10000) == 1);  // the fetch has connected and waits
  auto asked = std::chrono::steady_clock::now();
  watch.signal(signal);
  auto status = watch.wait(10s);
  auto took = std::chrono::steady_clock::now() - asked;
  ::close(listener);
  INFO(watch.output());
  REQUIRE(status);
  CHECK(*status == cohort::ExitStatus::exited(0));
  CHECK(took < 3s);  // the fetch alone would take 5 s
}

TEST_CASE("cohort status --watch into a file writes screen after screen, no control sequence",
          "[integration][status]") {
  // It cleared the screen with ESC sequences whatever its output was: a log of it was littered.
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  ChildProcess watch(
      {kCohortBin, "status", "--watch", "0.2", "--rdzv-endpoint", cluster.endpoint()},
      scratch.options());
  const std::string header = "cohort status --watch  " + cluster.endpoint();
  auto screens = [&] {
    std::string out = watch.output();
    size_t count = 0;
    for (size_t at = out.find(header); at != std::string::npos; at = out.find(header, at + 1))
      ++count;
    return count;
  };
  REQUIRE(wait_until([&] { return screens() >= 3; }, 20s));
  watch.signal(SIGINT);
  auto status = watch.wait(10s);
  std::string out = watch.output();
  INFO(out);
  REQUIRE(status);
  CHECK(*status == cohort::ExitStatus::exited(0));
  CHECK(out.find('\x1b') == std::string::npos);
  CHECK(contains(out, "no runs\n\n" + header));  // a blank line between screens
  CHECK(cluster.stop_daemon());
}
