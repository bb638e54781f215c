// A small helper process, forked when the agent starts, that SIGKILLs every worker process group
// still alive when the agent dies, however it dies (even SIGKILL). The agent tells it which
// groups exist over a pipe; the pipe's end of file is the agent's death. PR_SET_PDEATHSIG covers
// the workers; this covers their children. Owned by the agent; io thread only.
#pragma once

#include <sys/types.h>

namespace cohort {

class GroupKeeper {
 public:
  GroupKeeper() = default;
  ~GroupKeeper();
  GroupKeeper(const GroupKeeper&) = delete;
  GroupKeeper& operator=(const GroupKeeper&) = delete;

  /// Forks the keeper. Call once, early, while this process has a single thread.
  bool start();
  void add(pid_t process_group);
  void remove(pid_t process_group);
  pid_t pid() const { return keeper_pid_; }
  /// The pipe a new worker announces its own group on, before exec (SpawnRequest); -1 if none.
  int announce_fd() const { return pipe_write_; }

 private:
  void send(char op, pid_t process_group);

  int pipe_write_ = -1;
  pid_t keeper_pid_ = -1;
};

}  // namespace cohort
