// torchrun's FileTimer watchdog under cohort with PyTorch 2.6's own FileTimerClient: a scope
// that runs out kills its worker about a second after it was entered, as on 1.13
// (tests/integration/run_hang_test.cpp).
#include <csignal>

#include "tests/torch2/torch2_support.hpp"

using namespace cohort::test;

TEST_CASE("PyTorch 2.6: a FileTimerClient scope that runs out kills its worker", "[torch2][hang]") {
  require_torch2();
  Scratch scratch;
  std::string worker = std::string(kSourceDir) + "/tests/integration/hang_worker.py";
  RunResult result = scratch.run_argv(
      in_torch2(Scratch::cohort_argv({"--standalone", "--nproc-per-node", "1", "--no-python",
                                      kPython2, worker, "file-timer"})),
      scratch.options({{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}}), 240s);
  double ended =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 128 + SIGKILL);
  CHECK_FALSE(contains(result.out, "the timer did not fire"));
  CHECK(contains(failure_summary(result.err),
                 "timer     : FileTimer scope 'long_sleep' expired; killed with SIGKILL"));
  REQUIRE(file_exists(scratch.file("timer_set")));
  double scope_entered = std::stod(read_file(scratch.file("timer_set")));
  CHECK(ended - scope_entered >= 1.0);
  CHECK(ended - scope_entered < 5.0);  // the 2.6 root's process start is slower
  CHECK(scratch.nothing_left());
}
