// The agent's side of the group keeper: a small process (cohort's own binary, exec'd:
// keeper_process.hpp) that SIGKILLs every worker process group, and what the workers started in
// other sessions, when the agent dies, however it dies (even SIGKILL), or when it stops showing
// signs of life (SIGSTOP, a hung agent) for the stale limit. The agent tells it over a pipe which
// groups exist and where their cgroups are, and ticks once a second; the pipe's end of file,
// then the agent's exit, is its death. PR_SET_PDEATHSIG covers the workers; this covers their
// children: with cgroups by cgroup.kill of the per-agent directory, without by the agent's
// descendants the keeper looks up in /proc once a second. Owned by the agent; io thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <string>
#include <string_view>

namespace cohort {

class GroupKeeper {
 public:
  /// How often the agent ticks, and the shortest stale limit (a few ticks may be late).
  static constexpr std::chrono::seconds kTickInterval{1};
  static constexpr std::chrono::seconds kMinStaleLimit{3};

  explicit GroupKeeper(boost::asio::io_context& io) : tick_timer_(io) {}
  ~GroupKeeper();
  GroupKeeper(const GroupKeeper&) = delete;
  GroupKeeper& operator=(const GroupKeeper&) = delete;

  /// Starts the keeper (posix_spawn of cohort's own binary; false with errno set when it fails)
  /// and starts ticking. The keeper kills every group once no tick came for `stale_limit` (at least
  /// kMinStaleLimit; the run's heartbeat timeout, after which the daemon has dropped this node
  /// anyway), and goes on watching. Call once, before the first worker.
  bool start(std::chrono::milliseconds stale_limit);
  void add(pid_t process_group);
  void remove(pid_t process_group);
  /// The agent is about to stop on purpose (Ctrl-Z), its workers with it: no missing tick
  /// counts until the next one, which continue_ticking() sends at once. Its death still does.
  void pause();
  void continue_ticking();
  /// The directory that holds every worker cgroup: killed (cgroup.kill) with the groups, and
  /// removed once the agent is gone. False when the keeper cannot be told.
  bool contain_in(const std::string& cgroup_directory);
  /// A directory of the agent's own (its temporary log directory, named cohort_*), removed once
  /// the agent is gone, however it died. False when the keeper cannot be told.
  bool remove_when_orphaned(const std::string& directory);
  pid_t pid() const { return keeper_pid_; }
  /// The pipe a new worker announces its own group on, before exec (SpawnRequest); -1 if none.
  int announce_fd() const { return pipe_write_; }

 private:
  bool send(std::string_view line);
  bool send_path(char kind, const std::string& path);
  void tick();

  int pipe_write_ = -1;
  pid_t keeper_pid_ = -1;
  bool keeper_gone_ = false;  ///< its pipe broke: said once
  boost::asio::steady_timer tick_timer_;
};

}  // namespace cohort
