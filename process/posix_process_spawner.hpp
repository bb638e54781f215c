// Starts children the way every worker and ssh must start: in its own process group, with
// stdin/stdout/stderr given as file descriptors, a complete environment, SIGKILL as its
// parent-death signal, and (given a GroupKeeper) its group known to the keeper from before exec
// until it is reaped. Given a keeper (the agent's), it also keeps containers: a cgroup each
// (WorkerCgroups) that the child is born in (or joins before exec), where the machine allows;
// else killing a container kills the orphans the ChildReaper holds as subreaper. A request's
// CpuBinding is applied last before exec (CPU affinity, memory policy). Exits come from the
// ChildReaper; the fork and exec are process/fork_exec's. Owned by the process's top object
// (Agent, main of cohort launch); io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <map>
#include <memory>

#include "process/child_reaper.hpp"
#include "process/group_keeper.hpp"
#include "process/process_spawner.hpp"
#include "process/worker_cgroups.hpp"

namespace cohort {

class PosixProcessSpawner final : public ProcessSpawner {
 public:
  /// `keeper` may be null: the children's groups are then left to PR_SET_PDEATHSIG alone, and
  /// there are no containers.
  PosixProcessSpawner(boost::asio::io_context& io, ChildReaper& reaper,
                      GroupKeeper* keeper = nullptr);
  PosixProcessSpawner(const PosixProcessSpawner&) = delete;
  PosixProcessSpawner& operator=(const PosixProcessSpawner&) = delete;

  pid_t spawn(const SpawnRequest& request, ExitHandler on_exit, std::error_code& error) override;
  void signal_group(pid_t group, int signal) override;
  void signal_process(pid_t pid, int signal) override;
  int open_container() override;
  void kill_container(int container) override;
  void close_container(int container) override;
  void freeze_container(int container, bool frozen) override;

 private:
  boost::asio::io_context& io_;
  ChildReaper& reaper_;
  GroupKeeper* keeper_;
  bool cgroups_tried_ = false;
  std::unique_ptr<WorkerCgroups> cgroups_;  ///< null: the subreaper fallback
  int next_container_ = 0;
  std::map<int, int> containers_;  ///< container: its WorkerCgroups group (0: none)
};

}  // namespace cohort
