// A tmux server of a test's own, in which `cohort status --watch` runs in a real terminal; the
// test reads the screen with capture-pane. Test thread only.
#pragma once

#include <string>
#include <vector>

#include "tests/integration/integration_support.hpp"

namespace cohort::test {

// A tmux server of the test's own (its socket in the scratch directory), owned by the test and
// killed at its end.
class Tmux {
 public:
  explicit Tmux(Scratch& scratch) : scratch_(scratch), socket_(scratch.file("tmux.sock")) {}
  ~Tmux() { tmux({"kill-server"}); }

  RunResult tmux(std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/tmux", "-S", socket_});
    ChildOptions options = scratch_.options();
    options.env["TERM"] = "xterm";
    options.env.erase("COHORT_TEST_MARKER");  // the tmux server is the test's, not cohort's
    return run_to_end(args, options, 10s);
  }
  /// `cohort status --watch 0.3` (and `flags`) against `endpoint` in a `columns`-wide session.
  void start_watch(const std::string& endpoint, int columns, const std::string& session = "watch",
                   const std::string& flags = "") {
    RunResult started =
        tmux({"new-session", "-d", "-s", session, "-x", std::to_string(columns), "-y", "30",
              std::string(kCohortBin) + " status --watch 0.3 --rdzv-endpoint " + endpoint + " " +
                  flags});
    INFO(started.out << started.err);
    REQUIRE(started.status.success());
  }
  std::string screen(const std::string& session = "watch") {
    return tmux({"capture-pane", "-p", "-t", session}).out;
  }
  bool running(const std::string& session = "watch") {
    return tmux({"has-session", "-t", session}).status.success();
  }

 private:
  Scratch& scratch_;
  std::string socket_;
};

}  // namespace cohort::test
