#include "process/fork_exec.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <memory>
#include <optional>

#include "common/signal_blocking.hpp"

// The child of a clone3 with CLONE_VM starts on a stack of its own, with no frame to return to:
// only a few lines of assembly can start it, so this is x86-64 only (elsewhere, and under the
// sanitizers, which must see every thread, the child is forked). A fork copies the agent's page
// tables and then faults on each page either side writes: most of a worker's start.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define COHORT_SHARED_MEMORY_SPAWN 1

// long cohort_clone3_run(clone_args* args, size_t size, int (*child)(void*), void* context):
// clone3(args, size); the parent gets its result (a pid, or -errno); the child calls
// child(context) on the stack of `args` and ends with the value it returns.
extern "C" long cohort_clone3_run(clone_args* args, size_t size, int (*child)(void*),
                                  void* context);
asm(R"(
    .text
    .globl cohort_clone3_run
    .type cohort_clone3_run, @function
cohort_clone3_run:
    mov %rdx, %r8
    mov %rcx, %r9
    mov $435, %eax
    syscall
    test %rax, %rax
    jnz 1f
    xor %ebp, %ebp
    mov %r9, %rdi
    call *%r8
    mov %eax, %edi
    mov $60, %eax
    syscall
    hlt
1:
    ret
    .size cohort_clone3_run, .-cohort_clone3_run
)");
#else
#define COHORT_SHARED_MEMORY_SPAWN 0
#endif

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

namespace {

// fork_exec by fork: the child gets a copy of the agent's memory (page tables copied, then a
// copy-on-write fault for each page either side writes) and reports a failure through a pipe.
pid_t fork_exec_copying(const ExecPlan& plan, int cgroup_dir_fd, const ChildSetup& setup,
                        char** argv, char** envp, std::error_code& error) {
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
      ::execve(plan.executable.c_str(), argv, envp);
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

#if COHORT_SHARED_MEMORY_SPAWN

// What the child of fork_exec_sharing runs on its own stack, in the parent's memory.
struct SharedChild {
  const ChildSetup* setup;
  const char* path;
  char** argv;
  char** envp;
  int error;  ///< written by the child when setup or exec fails, read by the parent after
};

int run_shared_child(void* raw) {
  auto* child = static_cast<SharedChild*>(raw);
  if (int failed = (*child->setup)(); failed != 0) {
    child->error = failed;
    ::_exit(127);
  }
  unblock_signals_in_child();
  ::execve(child->path, child->argv, child->envp);
  child->error = errno;
  ::_exit(127);
}

constexpr size_t kChildStackBytes = 64 * 1024;

// fork_exec by clone3(CLONE_VM | CLONE_VFORK), as posix_spawn does it: the child runs in the
// parent's memory on a stack of its own while the calling thread waits for its exec or exit, so
// nothing is copied. nullopt when no child was started: no clone3 (before Linux 5.3), a seccomp
// filter that refuses it (Docker's answers ENOSYS, older ones EPERM), or any other refusal,
// which the fork that follows then meets and reports itself.
std::optional<pid_t> fork_exec_sharing(const ExecPlan& plan, int cgroup_dir_fd,
                                       const ChildSetup& setup, char** argv, char** envp,
                                       std::error_code& error) {
  auto stack = std::make_unique_for_overwrite<char[]>(kChildStackBytes);
  SharedChild child{&setup, plan.executable.c_str(), argv, envp, 0};
  clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = CLONE_VM | CLONE_VFORK;
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<uint64_t>(stack.get());
  args.stack_size = kChildStackBytes;
  if (cgroup_dir_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(cgroup_dir_fd);
  }
  long result;
  {
    SignalsBlocked blocked;  // none of the parent's handlers may run in the child (a Ctrl-C there)
    result = cohort_clone3_run(&args, sizeof args, run_shared_child, &child);
  }
  if (result < 0) return std::nullopt;
  pid_t pid = static_cast<pid_t>(result);
  if (child.error == 0) return pid;  // it has exec'ed: the vfork is over
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  error = std::error_code(child.error, std::system_category());
  return -1;
}

#endif

}  // namespace

pid_t fork_exec(const ExecPlan& plan, int cgroup_dir_fd, const ChildSetup& setup,
                std::error_code& error) {
  std::vector<std::string> argv_texts{plan.argv0.empty() ? plan.executable : plan.argv0};
  argv_texts.insert(argv_texts.end(), plan.args.begin(), plan.args.end());
  std::vector<std::string> env_texts = plan.env;
  std::vector<char*> argv = c_strings(argv_texts);
  std::vector<char*> envp = c_strings(env_texts);
#if COHORT_SHARED_MEMORY_SPAWN
  if (auto pid = fork_exec_sharing(plan, cgroup_dir_fd, setup, argv.data(), envp.data(), error)) {
    return *pid;
  }
#endif
  return fork_exec_copying(plan, cgroup_dir_fd, setup, argv.data(), envp.data(), error);
}

}  // namespace cohort
