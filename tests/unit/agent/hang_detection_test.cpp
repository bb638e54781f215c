// Hang detection's pure parts: the per-worker deadlines (a fake clock's time passed in), the
// heartbeat lines, the hang line and the frames quoted from a faulthandler traceback, and the
// diagnostics presets of the workers' environment.
#include <catch2/catch.hpp>

#include "agent/hang_report.hpp"
#include "agent/heartbeat_channel.hpp"
#include "agent/progress_deadlines.hpp"
#include "agent/worker_env.hpp"
#include "tests/support/fake_clock.hpp"

using namespace cohort;
using namespace std::chrono_literals;

namespace {

HangSettings settings(SteadyDuration timeout, SteadyDuration first) { return {timeout, first}; }

}  // namespace

TEST_CASE("a worker's deadline: the first-signal allowance, then the timeout after each signal",
          "[unit][agent][hang]") {
  test::FakeClock clock;
  SteadyTime start = clock.now();
  ProgressDeadlines deadlines(settings(2s, 20s));
  deadlines.started(0, start);
  deadlines.started(1, start);
  CHECK(deadlines.next_deadline() == start + 20s);
  CHECK_FALSE(deadlines.first_hung(start + 19s));

  CHECK(deadlines.signal(0, start + 1s, 5));  // the first: its deadline moved earlier
  CHECK(deadlines.signal(1, start + 1500ms));
  CHECK(deadlines.next_deadline() == start + 3s);
  CHECK_FALSE(deadlines.first_hung(start + 2999ms));
  CHECK(deadlines.first_hung(start + 3s) == 0u);
  CHECK(deadlines.record(0).step == 5);
  CHECK(deadlines.silent_for(0, start + 3s) == 2s);

  CHECK_FALSE(deadlines.signal(0, start + 3s));  // a beat without a step keeps the last step
  CHECK(deadlines.record(0).step == 5);
  CHECK(deadlines.first_hung(start + 3600ms) == 1u);  // now rank 1 is the one behind
}

TEST_CASE("the worker silent first is the hung one, exited workers are not watched",
          "[unit][agent][hang]") {
  SteadyTime start{};
  ProgressDeadlines deadlines(settings(1s, 10s));
  for (size_t worker = 0; worker < 3; ++worker) deadlines.started(worker, start);
  deadlines.signal(0, start + 2s);
  deadlines.signal(1, start + 1s);  // silent first
  deadlines.signal(2, start + 3s);
  CHECK(deadlines.first_hung(start + 10s) == 1u);
  deadlines.forget(1);
  CHECK(deadlines.first_hung(start + 10s) == 0u);
  CHECK(deadlines.next_deadline() == start + 3s);
  deadlines.forget_all();
  CHECK_FALSE(deadlines.next_deadline());
  CHECK_FALSE(deadlines.first_hung(start + 1h));
}

TEST_CASE("a pause (Ctrl-Z) is no worker's silence: every deadline moves by it",
          "[unit][agent][hang]") {
  SteadyTime start{};
  ProgressDeadlines deadlines(settings(1s, 10s));
  for (size_t worker = 0; worker < 3; ++worker) deadlines.started(worker, start);
  deadlines.signal(0, start + 2s, 7);
  deadlines.forget(2);
  deadlines.postpone(60s);
  CHECK_FALSE(deadlines.first_hung(start + 62s));
  CHECK(deadlines.next_deadline() == start + 63s);  // worker 0: its last signal, 60 s later
  CHECK(deadlines.silent_for(0, start + 62500ms) == 500ms);
  CHECK(deadlines.silent_for(1, start + 65s) == 5s);  // still before its first signal
  CHECK(deadlines.first_hung(start + 70s) == 0u);
  CHECK(deadlines.record(0).step == 7);
}

TEST_CASE("hang detection off: nothing is watched, steps are still kept", "[unit][agent][hang]") {
  ProgressDeadlines deadlines(HangSettings{});
  deadlines.started(0, SteadyTime{});
  deadlines.signal(0, SteadyTime{} + 1s, 42);
  deadlines.signal(7, SteadyTime{});  // never started: ignored
  CHECK_FALSE(deadlines.next_deadline());
  CHECK_FALSE(deadlines.first_hung(SteadyTime{} + 1h));
  CHECK(deadlines.record(0).step == 42);
}

TEST_CASE("heartbeat lines report the last step, other bytes are beats only",
          "[unit][agent][hang]") {
  HeartbeatLines lines;
  CHECK_FALSE(lines.feed("\n"));
  CHECK(lines.feed("step 3\nstep 4\n") == 4);
  CHECK_FALSE(lines.feed("ste"));  // split across reads
  CHECK(lines.feed("p 17\n") == 17);
  CHECK_FALSE(lines.feed("step x\nstep 5 6\nhello\n"));
  CHECK(lines.feed("step 9\r\n") == 9);
  CHECK_FALSE(lines.feed(std::string(10000, 'x') + "\n"));  // a long line does not grow memory
}

TEST_CASE("the hang line names the rank, the silence and the last signal", "[unit][agent][hang]") {
  WorkerFailure failure;
  failure.rank = 3;
  failure.local_rank = 1;
  failure.pid = 4242;
  HangReport hang;
  hang.silent_for = 2500ms;
  CHECK(hang_line(failure, hang) ==
        "rank 3 (local rank 1, pid 4242) made no progress for 2.5 s (last signal: none since it "
        "started)");
  hang.step = 12;
  hang.last_signal = std::chrono::system_clock::now();
  std::string line = hang_line(failure, hang);
  CHECK(line.find("(last signal: step 12 at ") != std::string::npos);
}

TEST_CASE("the innermost frames of the current thread are quoted from a faulthandler dump",
          "[unit][agent][hang]") {
  const std::string dump =
      "Fatal Python error: Aborted\n"
      "\n"
      "Thread 0x00007f0000000001 (most recent call first):\n"
      "  File \"/x/loader.py\", line 9 in prefetch\n"
      "\n"
      "Current thread 0x00007f0000000002 (most recent call first):\n"
      "  File \"/x/train.py\", line 5 in wedged_in_allreduce\n"
      "  File \"/x/train.py\", line 8 in step\n"
      "  File \"/x/train.py\", line 11 in train\n"
      "  File \"/x/train.py\", line 14 in <module>\n"
      "\n"
      "Extension modules: numpy.core (total: 1)\n";
  std::vector<std::string> frames = innermost_frames(dump);
  REQUIRE(frames.size() == 3);
  CHECK(frames[0] == "File \"/x/train.py\", line 5 in wedged_in_allreduce");
  CHECK(frames[2] == "File \"/x/train.py\", line 11 in train");
  CHECK(innermost_frames("Thread 0x1 (most recent call first):\n  File \"a.py\", line 1 in f\n") ==
        std::vector<std::string>{"File \"a.py\", line 1 in f"});
  CHECK(innermost_frames("no traceback here\n").empty());
}

TEST_CASE("a native worker's innermost frames are quoted from eu-stack", "[unit][agent][hang]") {
  const std::string stacks =
      "PID 30153 - process\n"
      "TID 30153:\n"
      "#0  0x00007fe2cd7ea503 clock_nanosleep@GLIBC_2.2.5\n"
      "#1  0x00007fe2cd7eee53 __nanosleep\n"
      "#2  0x00005619e3b564af wedged_in_allreduce\n"
      "#3  0x00005619e3b55f81 main\n"
      "TID 30154:\n"
      "#0  0x00007fe2cd7ea503 epoll_wait\n";
  std::vector<std::string> frames = innermost_frames(stacks);
  REQUIRE(frames.size() == 3);
  CHECK(frames[0] == "#0  0x00007fe2cd7ea503 clock_nanosleep@GLIBC_2.2.5");
  CHECK(frames[2] == "#2  0x00005619e3b564af wedged_in_allreduce");
}

TEST_CASE("hang diagnostics presets: set unless the user set them", "[unit][agent][hang]") {
  WorkerEnvSettings torch_2_11;
  torch_2_11.torch_major = 2;
  torch_2_11.torch_minor = 11;
  EnvMap vars = hang_variables("/logs/run/attempt_2", {}, torch_2_11);
  CHECK(vars["PYTHONFAULTHANDLER"] == "1");
  CHECK(vars["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1");
  CHECK(vars["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000");
  CHECK(vars["TORCH_FR_DUMP_TEMP_FILE"] == "/logs/run/attempt_2/nccl_trace_rank_");
  CHECK(vars["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] == "/logs/run/attempt_2/nccl_pipe_rank_");
  CHECK(nccl_dump_pipe(vars, 5) == "/logs/run/attempt_2/nccl_pipe_rank_5.pipe");

  EnvMap user{{"PYTHONFAULTHANDLER", ""},
              {"TORCH_NCCL_TRACE_BUFFER_SIZE", "100"},
              {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "/mine/pipe_"}};
  EnvMap kept = hang_variables("/logs/run/attempt_0", user, torch_2_11);
  CHECK(kept["PYTHONFAULTHANDLER"].empty());
  CHECK(kept["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "100");
  CHECK(nccl_dump_pipe(kept, 0) == "/mine/pipe_0.pipe");

  EnvMap no_files = hang_variables("", {}, torch_2_11);
  CHECK(no_files.count("TORCH_FR_DUMP_TEMP_FILE") == 0);
  CHECK(nccl_dump_pipe(no_files, 0).empty());
}

TEST_CASE("the flight recorder's dump stem goes under the one name the workers' torch reads",
          "[unit][agent][hang]") {
  auto names = [](std::optional<int> major, std::optional<int> minor, const EnvMap& user = {}) {
    WorkerEnvSettings settings;
    settings.torch_major = major;
    settings.torch_minor = minor;
    std::string found;
    for (const auto& [name, value] : hang_variables("/a", user, settings)) {
      if (name.find("TEMP_FILE") != std::string::npos) found += name + "=" + value + " ";
    }
    return found;
  };
  const std::string newer = "TORCH_FR_DUMP_TEMP_FILE=/a/nccl_trace_rank_ ";
  const std::string older = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/a/nccl_trace_rank_ ";
  CHECK(names(2, 11) == newer);  // 2.11 warns about the older name
  CHECK(names(2, 9) == newer);
  CHECK(names(3, 0) == newer);
  CHECK(names(2, 6) == older);  // 2.6 reads only the older name
  CHECK(names(1, 13) == older);
  CHECK(names(2, std::nullopt) == newer + older);  // --no-python: the dump is kept either way
  CHECK(names(std::nullopt, std::nullopt) == newer + older);
  // What the user set is kept, alone.
  CHECK(names(2, 11, {{"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/mine_"}}) ==
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/mine_ ");
}

TEST_CASE("the heartbeat module's directory goes at the end of PYTHONPATH", "[unit][agent][hang]") {
  CHECK(python_path_with("/opt/cohort/python", {}) == "/opt/cohort/python");
  CHECK(python_path_with("/opt/cohort/python", {{"PYTHONPATH", "/mine"}}) ==
        "/mine:/opt/cohort/python");
}
