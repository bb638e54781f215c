#include "process/agent_silence.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "process/process_tree.hpp"

namespace cohort {

bool parse_schedstat(std::string_view text, ProcessVitals& vitals) {
  unsigned long long run = 0, wait = 0, slices = 0;
  std::string copy(text);
  if (std::sscanf(copy.c_str(), "%llu %llu %llu", &run, &wait, &slices) != 3) return false;
  vitals.run_ns = run;
  vitals.runqueue_wait_ns = wait;
  return true;
}

std::optional<ProcessVitals> read_process_vitals(pid_t pid) {
  std::optional<ProcStat> stat = read_proc_stat(pid);
  if (!stat || stat->state == 'Z' || stat->state == 'X') return std::nullopt;
  ProcessVitals vitals;
  vitals.state = stat->state;
  std::ifstream file("/proc/" + std::to_string(pid) + "/schedstat");
  std::stringstream text;
  text << file.rdbuf();
  parse_schedstat(text.str(), vitals);  // without schedstats: the state alone decides
  return vitals;
}

std::string silence_verdict(const ProcessVitals& then, const std::optional<ProcessVitals>& now,
                            std::chrono::milliseconds silent,
                            std::chrono::milliseconds stale_limit) {
  if (silent < stale_limit) return "";
  if (!now) return "the agent is gone";
  if (now->state == 'T' || now->state == 't') return "stopped";
  uint64_t waited_ns =
      now->runqueue_wait_ns - std::min(now->runqueue_wait_ns, then.runqueue_wait_ns);
  auto silent_ns =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(silent).count());
  bool starved = now->state == 'R' || waited_ns >= silent_ns / 10;
  if (!starved) return "hung";
  if (silent < stale_limit * kStarvedPatience) return "";
  return "starved of CPU for " + std::to_string(kStarvedPatience) + " times the stale limit";
}

}  // namespace cohort
