// fork_exec with real children: the program runs with its arguments and environment, an exec or
// setup failure comes back as its errno (the child reaped), what the setup changes stays the
// child's, other threads run on meanwhile, and fork_into_cgroup with a cgroup directory starts the
// child in that cgroup (root and a cgroup v2 hierarchy only).
#include "process/fork_exec.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "process/worker_cgroups.hpp"
#include "tests/support/temp_dir.hpp"

using namespace cohort;
using cohort::test::read_file;

namespace {

int wait_for(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("fork_exec runs the program with its arguments and only the given environment",
          "[unit][process]") {
  std::error_code error;
  pid_t pid = fork_exec(
      ExecPlan{"/bin/sh",
               {"-c",
                "[ \"$1\" = two ] && [ \"$ONLY\" = 1 ] && "
                "[ -z \"$HOME\" ]",
                "one", "two"},
               {"ONLY=1"}},
      -1, [] { return 0; }, error);
  REQUIRE_FALSE(error);
  REQUIRE(pid > 0);
  CHECK(wait_for(pid) == 0);
}

TEST_CASE("fork_exec reports an exec failure as its errno and leaves no child", "[unit][process]") {
  std::error_code error;
  pid_t pid = fork_exec(
      ExecPlan{"/nonexistent/program", {}, {}}, -1, [] { return 0; }, error);
  CHECK(pid == -1);
  CHECK(error.value() == ENOENT);
  CHECK(::waitpid(-1, nullptr, WNOHANG) == -1);  // reaped already: no child left
  CHECK(errno == ECHILD);
}

TEST_CASE("fork_exec reports the errno the child's setup returns, and never execs then",
          "[unit][process]") {
  char marker[] = "/tmp/fork_exec_test_XXXXXX";
  int fd = ::mkstemp(marker);
  REQUIRE(fd >= 0);
  ::close(fd);
  ::unlink(marker);
  std::error_code error;
  pid_t pid = fork_exec(
      ExecPlan{"/usr/bin/touch", {marker}, {}}, -1, [] { return EPERM; }, error);
  CHECK(pid == -1);
  CHECK(error.value() == EPERM);
  CHECK(::access(marker, F_OK) != 0);
}

TEST_CASE("fork_into_cgroup starts the child in the cgroup it is given", "[unit][process]") {
  std::string why;
  std::string own = own_cgroup_path(why);
  std::string parent =
      own.empty() ? "" : cgroup2_directory(read_file("/proc/self/mountinfo"), own, why);
  if (::geteuid() != 0 || parent.empty()) {
    FAIL("missing prerequisite: root and a cgroup v2 hierarchy (" << why << ")");
  }
  std::string name = "fork-exec-test-" + std::to_string(::getpid());
  std::string directory = parent + "/" + name;
  REQUIRE(::mkdir(directory.c_str(), 0755) == 0);
  int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(dir_fd >= 0);
  int report[2];
  REQUIRE(::pipe(report) == 0);
  pid_t pid = fork_into_cgroup(dir_fd);
  if (pid == 0) {  // what /proc says of this child's cgroup, through the pipe
    int self = ::open("/proc/self/cgroup", O_RDONLY);
    char text[4096];
    ssize_t got = self < 0 ? 0 : ::read(self, text, sizeof text);
    if (got > 0) (void)!::write(report[1], text, static_cast<size_t>(got));
    ::_exit(0);
  }
  ::close(report[1]);
  REQUIRE(pid > 0);
  char text[4096];
  ssize_t got = ::read(report[0], text, sizeof text);
  ::close(report[0]);
  CHECK(wait_for(pid) == 0);
  ::close(dir_fd);
  std::string child_cgroup = unified_cgroup_path(std::string(text, got > 0 ? got : 0), why);
  CHECK(child_cgroup == (own == "/" ? "" : own) + "/" + name);
  CHECK(remove_cgroup(directory));
}

namespace {

void count_signal(int) {}

}  // namespace

TEST_CASE(
    "fork_exec's child sets up with every signal blocked, and the program starts with none "
    "blocked and none of the parent's handlers",
    "[unit][process]") {
  // A handler of the parent's that ran in the child before exec would act for the parent (asio's
  // writes to the parent's signal pipe: one Ctrl-Z stopped cohort twice).
  struct sigaction handled = {}, previous_usr1 = {}, previous_pipe = {};
  handled.sa_handler = count_signal;
  REQUIRE(::sigaction(SIGUSR1, &handled, &previous_usr1) == 0);
  struct sigaction ignored = {};
  ignored.sa_handler = SIG_IGN;
  REQUIRE(::sigaction(SIGPIPE, &ignored, &previous_pipe) == 0);
  std::error_code error;
  test::TempDir dir;
  std::string status_file = dir.path() + "/status";
  // cat's own status: it blocks, catches and ignores nothing itself.
  pid_t pid = fork_exec(
      ExecPlan{"/bin/sh", {"-c", "cat /proc/self/status > " + status_file}, {}}, -1,
      [] {
        sigset_t current;
        ::sigprocmask(SIG_BLOCK, nullptr, &current);
        return ::sigismember(&current, SIGINT) && ::sigismember(&current, SIGTSTP) ? 0 : EINVAL;
      },
      error);
  ::sigaction(SIGUSR1, &previous_usr1, nullptr);
  ::sigaction(SIGPIPE, &previous_pipe, nullptr);
  INFO(error.message());
  REQUIRE_FALSE(error);
  REQUIRE(wait_for(pid) == 0);
  std::string status = read_file(status_file);
  INFO(status);
  // Each is a hex mask, bit N-1 for signal N.
  auto mask = [&](const std::string& field) {
    size_t at = status.find("\n" + field + ":");
    REQUIRE(at != std::string::npos);
    return std::stoull(status.substr(at + field.size() + 2), nullptr, 16);
  };
  CHECK(mask("SigBlk") == 0);
  CHECK(mask("SigCgt") == 0);
  CHECK((mask("SigIgn") >> (SIGPIPE - 1) & 1) == 1);  // an ignored signal stays ignored
  sigset_t after;
  ::sigprocmask(SIG_BLOCK, nullptr, &after);
  CHECK_FALSE(::sigismember(&after, SIGINT));  // the parent's own mask is back
}

TEST_CASE(
    "what the child's setup changes (its descriptors, signal dispositions, directory) stays the "
    "child's, though it may run in the parent's memory",
    "[unit][process]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  struct sigaction previous = {}, handled = {};
  handled.sa_handler = count_signal;
  REQUIRE(::sigaction(SIGUSR2, &handled, &previous) == 0);
  char before[4096];
  REQUIRE(::getcwd(before, sizeof before) != nullptr);
  std::error_code error;
  pid_t pid = fork_exec(
      ExecPlan{"/bin/true", {}, {}}, -1,
      [read_end = fds[0]] {
        ::close(read_end);
        ::signal(SIGUSR2, SIG_IGN);
        return ::chdir("/") == 0 ? 0 : errno;
      },
      error);
  REQUIRE_FALSE(error);
  CHECK(wait_for(pid) == 0);
  CHECK(::fcntl(fds[0], F_GETFD) >= 0);  // still open here
  struct sigaction now = {};
  REQUIRE(::sigaction(SIGUSR2, &previous, &now) == 0);
  CHECK(now.sa_handler == count_signal);
  char after[4096];
  REQUIRE(::getcwd(after, sizeof after) != nullptr);
  CHECK(std::string(after) == before);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_CASE("children start and exec while another thread of the parent allocates all along",
          "[unit][process]") {
  std::atomic<bool> done{false};
  std::thread churn([&done] {
    while (!done.load()) {
      std::vector<std::string> garbage(64, std::string(512, 'x'));
      garbage.clear();
    }
  });
  int started = 0, succeeded = 0;
  for (int i = 0; i < 100; ++i) {
    std::error_code error;
    pid_t pid = fork_exec(
        ExecPlan{"/bin/true", {}, {"A=1"}}, -1, [] { return 0; }, error);
    if (pid <= 0) continue;
    ++started;
    succeeded += wait_for(pid) == 0;
  }
  done = true;
  churn.join();
  CHECK(started == 100);
  CHECK(succeeded == 100);
}

namespace {

// In a child of this test: a seccomp filter that answers clone3 with `error` (as Docker's default
// profile answers ENOSYS, older ones EPERM), then fork_exec of /bin/true; exits 0 when that ran.
int exit_of_spawn_without_clone3(int error) {
  pid_t tester = ::fork();
  if (tester == 0) {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(error) & 0xffff)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
      ::_exit(90);
    }
    std::error_code spawn_error;
    pid_t pid = fork_exec(
        ExecPlan{"/bin/true", {}, {}}, -1, [] { return 0; }, spawn_error);
    if (pid <= 0) ::_exit(91);
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) ::_exit(92);
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 93);
  }
  return wait_for(tester);
}

}  // namespace

TEST_CASE("where a seccomp filter refuses clone3, fork_exec forks instead", "[unit][process]") {
  CHECK(exit_of_spawn_without_clone3(ENOSYS) == 0);
  CHECK(exit_of_spawn_without_clone3(EPERM) == 0);
}
