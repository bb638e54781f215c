#include "tests/support/child_process.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "tests/support/temp_dir.hpp"

extern char** environ;

namespace cohort::test {

ChildProcess::ChildProcess(const std::vector<std::string>& argv, ChildOptions options) {
  static int counter = 0;
  std::string base = options.output_dir + "/" + options.name + "_" + std::to_string(counter++);
  stdout_path_ = base + ".out";
  stderr_path_ = base + ".err";
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text(*entry);
    size_t equals = text.find('=');
    if (equals != std::string::npos) env[text.substr(0, equals)] = text.substr(equals + 1);
  }
  for (const auto& name : options.unset_env) env.erase(name);
  for (const auto& [name, value] : options.env) env[name] = value;
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp, args;
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& arg : argv_copy) args.push_back(arg.data());
  args.push_back(nullptr);

  // The write end closes at exec: its end of file tells that the child runs its own program, and
  // no longer the test's signal handlers (a check of the child's caught signals before that would
  // see Catch2's).
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::setpgid(0, 0);
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(stdout_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // As from a terminal's foreground: a test run as a background job of a script inherits
    // SIGQUIT (and SIGINT) ignored, which would make a stop signal sent before cohort's handlers
    // are in place vanish instead of ending it.
    for (int stop : {SIGINT, SIGQUIT, SIGHUP, SIGTERM}) ::signal(stop, SIG_DFL);
    if (!options.working_dir.empty() && ::chdir(options.working_dir.c_str()) != 0) ::_exit(126);
    // Nothing of the test process leaks into the child but the pipe's write end, as fd 3.
    if (exec_pipe[1] != 3 && ::dup3(exec_pipe[1], 3, O_CLOEXEC) < 0) ::_exit(126);
    ::close_range(4, ~0U, 0);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);
  ::close(exec_pipe[1]);
  char ignored;
  while (::read(exec_pipe[0], &ignored, 1) < 0 && errno == EINTR) {
  }
  ::close(exec_pipe[0]);
}

// Killed, then reaped within 30 s: a child that a SIGKILL cannot end (stuck in the kernel) is
// reported and left, rather than hanging the test binary until CI's limit.
ChildProcess::~ChildProcess() {
  if (status_ || pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  if (!wait(std::chrono::seconds(30))) {
    std::fprintf(stderr, "test: pid %d did not end within 30 s of SIGKILL: left behind\n", pid_);
  }
}

void ChildProcess::signal(int signal) const { ::kill(pid_, signal); }

std::optional<ExitStatus> ChildProcess::wait(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t got = ::waitpid(pid_, &status, WNOHANG);
    if (got == pid_) {
      status_ = ExitStatus::from_wait_status(status);
      return status_;
    }
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::string ChildProcess::out() const { return read_file(stdout_path_); }
std::string ChildProcess::err() const { return read_file(stderr_path_); }
std::string ChildProcess::output() const {
  return "--- stdout ---\n" + out() + "--- stderr ---\n" + err();
}

bool process_alive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  size_t close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] != 'Z';
}

RunResult run_to_end(const std::vector<std::string>& argv, ChildOptions options,
                     std::chrono::milliseconds timeout) {
  ChildProcess child(argv, std::move(options));
  std::optional<ExitStatus> status = child.wait(timeout);
  if (!status) {
    throw std::runtime_error("timed out: " + argv.front() + "\n" + child.output());
  }
  return {*status, child.out(), child.err()};
}

}  // namespace cohort::test
