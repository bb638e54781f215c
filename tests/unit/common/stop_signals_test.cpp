// stop_signals_to_take and hangup_ignored: SIGHUP is left out, and reported ignored, exactly when
// the process ignores it (as `nohup` starts a program); the other stop signals are always taken.
#include "common/stop_signals.hpp"

#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>

using namespace cohort;

namespace {

bool has(const std::vector<int>& signals, int signal) {
  return std::find(signals.begin(), signals.end(), signal) != signals.end();
}

// Sets SIGHUP's disposition for a scope, then puts back what was there.
class HangupDisposition {
 public:
  explicit HangupDisposition(void (*handler)(int)) {
    struct sigaction wanted {};
    wanted.sa_handler = handler;
    ::sigaction(SIGHUP, &wanted, &previous_);
  }
  ~HangupDisposition() { ::sigaction(SIGHUP, &previous_, nullptr); }

 private:
  struct sigaction previous_ {};
};

void ignore_it(int) {}

}  // namespace

TEST_CASE("SIGHUP is taken with the other stop signals unless the process ignores it (nohup)",
          "[stop_signals]") {
  SECTION("at its default") {
    HangupDisposition hangup(SIG_DFL);
    CHECK_FALSE(hangup_ignored());
    std::vector<int> signals = stop_signals_to_take();
    CHECK(signals.size() == 4);
    for (int signal : {SIGINT, SIGTERM, SIGQUIT, SIGHUP}) CHECK(has(signals, signal));
  }
  SECTION("caught by a handler: not ignored") {
    HangupDisposition hangup(ignore_it);
    CHECK_FALSE(hangup_ignored());
    CHECK(has(stop_signals_to_take(), SIGHUP));
  }
  SECTION("ignored, as nohup starts a program") {
    HangupDisposition hangup(SIG_IGN);
    CHECK(hangup_ignored());
    std::vector<int> signals = stop_signals_to_take();
    CHECK(signals.size() == 3);
    CHECK_FALSE(has(signals, SIGHUP));
    for (int signal : {SIGINT, SIGTERM, SIGQUIT}) CHECK(has(signals, signal));
  }
}
