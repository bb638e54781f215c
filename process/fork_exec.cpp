#include "process/fork_exec.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "common/signal_blocking.hpp"

namespace cohort {

namespace {

// Writes `error` to the pipe and ends the child: between fork and exec, no heap.
[[noreturn]] void fail_child(int pipe_write, int error) {
  while (::write(pipe_write, &error, sizeof error) < 0 && errno == EINTR) {
  }
  ::_exit(127);
}

// The errno the child wrote before it ended, or 0 when the pipe closed at exec.
int read_child_error(int pipe_read) {
  int error = 0;
  ssize_t got = 0;
  do {
    got = ::read(pipe_read, &error, sizeof error);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof error)) return error;
  return got < 0 ? errno : 0;
}

std::vector<char*> c_strings(std::vector<std::string>& texts) {
  std::vector<char*> pointers;
  pointers.reserve(texts.size() + 1);
  for (std::string& text : texts) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

pid_t fork_into_cgroup(int cgroup_dir_fd) {
  if (cgroup_dir_fd < 0) return ::fork();
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer carries its own state across fork() alone; a child of a raw clone3 would run
  // instrumented code on state another thread may have held. Under it the child joins by a write.
  pid_t pid = ::fork();
  if (pid == 0) {
    int procs = ::openat(cgroup_dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (procs < 0 || ::write(procs, "0", 1) != 1) ::_exit(126);
    ::close(procs);
  }
  return pid;
#endif
  clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(cgroup_dir_fd);
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
}

pid_t fork_exec(const ExecPlan& plan, int cgroup_dir_fd, const ChildSetup& setup,
                std::error_code& error) {
  std::vector<std::string> argv_texts{plan.argv0.empty() ? plan.executable : plan.argv0};
  argv_texts.insert(argv_texts.end(), plan.args.begin(), plan.args.end());
  std::vector<std::string> env_texts = plan.env;
  std::vector<char*> argv = c_strings(argv_texts);
  std::vector<char*> envp = c_strings(env_texts);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    error = std::error_code(errno, std::system_category());
    return -1;
  }
  pid_t pid;
  int fork_error;
  {
    SignalsBlocked blocked;  // none of the parent's handlers may run in the child (a Ctrl-C there)
    pid = fork_into_cgroup(cgroup_dir_fd);
    if (pid == 0) {
      ::close(pipe_fds[0]);
      if (int failed = setup(); failed != 0) fail_child(pipe_fds[1], failed);
      unblock_signals_in_child();
      ::execve(plan.executable.c_str(), argv.data(), envp.data());
      fail_child(pipe_fds[1], errno);
    }
    fork_error = errno;
  }
  ::close(pipe_fds[1]);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    error = std::error_code(fork_error, std::system_category());
    return -1;
  }
  int child_error = read_child_error(pipe_fds[0]);
  ::close(pipe_fds[0]);
  if (child_error == 0) return pid;
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  error = std::error_code(child_error, std::system_category());
  return -1;
}

}  // namespace cohort
