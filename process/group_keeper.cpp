#include "process/group_keeper.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

namespace cohort {
namespace {

// Runs in the forked keeper: reads "+pgid" / "-pgid" lines until end of file, then kills every
// group it still knows. Uses only async-signal-safe calls and plain reads.
[[noreturn]] void keeper_main(int pipe_read) {
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE})
    ::signal(signal, SIG_IGN);
  std::set<pid_t> groups;
  std::string pending;
  char buffer[512];
  for (;;) {
    ssize_t got = ::read(pipe_read, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    pending.append(buffer, static_cast<size_t>(got));
    size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      pid_t group = static_cast<pid_t>(std::atol(pending.c_str() + 1));
      if (pending[0] == '+') groups.insert(group);
      if (pending[0] == '-') groups.erase(group);
      pending.erase(0, newline + 1);
    }
  }
  for (pid_t group : groups) ::kill(-group, SIGKILL);
  ::_exit(0);
}

}  // namespace

GroupKeeper::~GroupKeeper() {
  if (pipe_write_ >= 0) ::close(pipe_write_);
}

bool GroupKeeper::start() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return false;
  }
  if (pid == 0) {
    ::close(fds[1]);
    // Keep nothing of the agent's open (sockets, other pipes); stderr stays for diagnostics.
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != fds[0]) ::close(fd);
    }
    ::setpgid(0, 0);  // a terminal's Ctrl-C goes to the agent, which decides what happens
    keeper_main(fds[0]);
  }
  ::close(fds[0]);
  pipe_write_ = fds[1];
  keeper_pid_ = pid;
  return true;
}

void GroupKeeper::add(pid_t process_group) { send('+', process_group); }
void GroupKeeper::remove(pid_t process_group) { send('-', process_group); }

void GroupKeeper::send(char op, pid_t process_group) {
  if (pipe_write_ < 0) return;
  char line[32];
  int length = std::snprintf(line, sizeof line, "%c%d\n", op, static_cast<int>(process_group));
  while (::write(pipe_write_, line, static_cast<size_t>(length)) < 0 && errno == EINTR) {
  }
}

}  // namespace cohort
