// What putting a round's workers in a cgroup costs, per round, measured on this machine's kernel:
// each round makes a group cgroup (WorkerCgroups::make_group), starts 8 /bin/true in it and waits
// for them, then removes the cgroup (WorkerCgroups::remove), three ways interleaved:
//   none      the 8 children without a cgroup (the floor);
//   birth     born in the cgroup: clone3 CLONE_INTO_CGROUP (what cohort does);
//   migrate   forked, then each writes itself to cgroup.procs between fork and exec (cohort
//             before this change, and still on kernels before Linux 5.7).
// Prints the median and 90th percentile of each, and each way's cost over `none`. Needs root (or a
// delegated cgroup) and cgroup v2. Usage: cgroup_round_bench [ROUNDS] [CHILDREN]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "process/fork_exec.hpp"
#include "process/worker_cgroups.hpp"

using namespace cohort;
using Clock = std::chrono::steady_clock;

namespace {

enum class Way { None, Birth, Migrate };

// One round: make the cgroup (not for None), start `children` /bin/true, reap them, remove it.
double round_ms(WorkerCgroups& cgroups, Way way, int children) {
  auto start = Clock::now();
  int group = way == Way::None ? 0 : cgroups.make_group();
  std::vector<pid_t> pids;
  for (int i = 0; i < children; ++i) {
    int dir_fd = way == Way::Birth ? cgroups.open_directory(group) : -1;
    int procs_fd = way == Way::Migrate ? cgroups.open_procs(group) : -1;
    std::error_code error;
    pid_t pid = fork_exec(
        ExecPlan{"/bin/true", {}, {}}, dir_fd,
        [procs_fd] {
          if (procs_fd >= 0 && ::write(procs_fd, "0", 1) != 1) return errno;
          return 0;
        },
        error);
    for (int fd : {dir_fd, procs_fd}) {
      if (fd >= 0) ::close(fd);
    }
    if (pid < 0) {
      std::fprintf(stderr, "cannot start /bin/true: %s\n", error.message().c_str());
      std::exit(1);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) ::waitpid(pid, nullptr, 0);
  if (group > 0) cgroups.remove(group);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(fraction * static_cast<double>(values.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 50;
  int children = argc > 2 ? std::atoi(argv[2]) : 8;
  boost::asio::io_context io;
  std::string why;
  std::unique_ptr<WorkerCgroups> cgroups = WorkerCgroups::create(io, why);
  if (!cgroups) {
    std::fprintf(stderr, "no worker cgroups here: %s\n", why.c_str());
    return 1;
  }
  if (!cgroups->joins_at_birth()) std::fprintf(stderr, "this kernel has no CLONE_INTO_CGROUP\n");
  const std::map<Way, const char*> names{
      {Way::None, "none"}, {Way::Birth, "birth"}, {Way::Migrate, "migrate"}};
  std::map<Way, std::vector<double>> samples;
  for (int round = 0; round < rounds; ++round) {  // interleaved: noise costs every way alike
    for (const auto& [way, name] : names) samples[way].push_back(round_ms(*cgroups, way, children));
    io.poll();  // removals retried on the timer
  }
  double floor = percentile(samples[Way::None], 0.5);
  std::printf("%d rounds of %d children: median, p90, median over none\n", rounds, children);
  for (const auto& [way, name] : names) {
    double median = percentile(samples[way], 0.5);
    std::printf("%-8s %7.2f ms %7.2f ms %+7.2f ms\n", name, median, percentile(samples[way], 0.9),
                median - floor);
  }
  return 0;
}
