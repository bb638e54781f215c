#include "tests/support/fake_process_spawner.hpp"

#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace cohort::test {
namespace {

int copy_of(int fd) { return fd >= 0 ? ::dup(fd) : -1; }

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

FakeProcessSpawner::~FakeProcessSpawner() {
  for (auto& [pid, child] : children_) {
    close_fd(child.stdout_fd);
    close_fd(child.stderr_fd);
    close_fd(child.heartbeat_fd);
  }
}

pid_t FakeProcessSpawner::spawn(const SpawnRequest& request, ExitHandler on_exit,
                                std::error_code& error) {
  if (missing_.count(request.executable)) {
    error = std::make_error_code(std::errc::no_such_file_or_directory);
    return -1;
  }
  pid_t pid = next_pid_++;
  Child& child = children_[pid];
  child.pid = pid;
  child.request = request;
  child.on_exit = std::move(on_exit);
  child.stdout_fd = copy_of(request.stdout_fd);
  child.stderr_fd = copy_of(request.stderr_fd);
  if (!request.inherit_fds.empty()) child.heartbeat_fd = copy_of(request.inherit_fds.front());
  order_.push_back(pid);
  return pid;
}

void FakeProcessSpawner::signal_group(pid_t group, int signal) {
  signals_.push_back({group, signal, true});
}

void FakeProcessSpawner::signal_process(pid_t pid, int signal) {
  signals_.push_back({pid, signal, false});
}

int FakeProcessSpawner::open_container() { return ++next_container_; }

void FakeProcessSpawner::kill_container(int container) {
  container_calls_[container].push_back("kill");
}

void FakeProcessSpawner::close_container(int container) {
  container_calls_[container].push_back("close");
}

void FakeProcessSpawner::write_stderr(pid_t pid, std::string_view text) {
  int fd = children_.at(pid).stderr_fd;
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error("cannot write the fake child's stderr");
}

void FakeProcessSpawner::write_heartbeat(pid_t pid, std::string_view text) {
  int fd = children_.at(pid).heartbeat_fd;
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error("cannot write the fake child's heartbeat descriptor");
}

void FakeProcessSpawner::exit(pid_t pid, ExitStatus status) {
  Child& child = children_.at(pid);
  if (child.exited) throw std::logic_error("a fake child exits once");
  child.exited = true;
  close_fd(child.stdout_fd);
  close_fd(child.stderr_fd);
  close_fd(child.heartbeat_fd);
  ExitHandler handler = std::move(child.on_exit);
  handler(status);
}

std::vector<int> FakeProcessSpawner::group_signals(pid_t group) const {
  std::vector<int> result;
  for (const Signal& sent : signals_) {
    if (sent.group && sent.target == group) result.push_back(sent.signal);
  }
  return result;
}

}  // namespace cohort::test
