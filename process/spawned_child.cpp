#include "process/spawned_child.hpp"

#include <fcntl.h>
#include <unistd.h>

namespace cohort {

SpawnedChild::~SpawnedChild() {
  *alive_ = false;
  close_pumps();
  close_child_fds();
  for (int fd : kept_fds_) ::close(fd);
}

int SpawnedChild::for_child(int fd) {
  if (fd >= 0) child_fds_.push_back(fd);
  return fd;
}

int SpawnedChild::keep(int fd) {
  if (fd >= 0) kept_fds_.push_back(fd);
  return fd;
}

int SpawnedChild::pipe_to(Stream stream, PumpTarget target) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  (stream == Stream::Out ? out_ : err_) = std::make_shared<OutputPump>(io_, fds[0], target);
  return for_child(fds[1]);
}

bool SpawnedChild::spawn(ProcessSpawner& spawner, const SpawnRequest& request, Events events,
                         std::error_code& error) {
  events_ = std::move(events);
  pid_ = spawner.spawn(
      request,
      [this, alive = alive_](ExitStatus status) {
        if (!*alive) return;
        status_ = status;
        for (auto* pump : {&out_, &err_}) {
          if (*pump) (*pump)->read_to_end();
        }
        if (events_.exited) events_.exited(status);
      },
      error);
  close_child_fds();  // the child has its copies
  if (pid_ < 0) {
    close_pumps();
    out_.reset();
    err_.reset();
    return false;
  }
  for (auto* pump : {&out_, &err_}) {
    if (!*pump) continue;
    ++open_pumps_;
    (*pump)->start(
        [this, alive = alive_] {
          if (!*alive) return;
          if (--open_pumps_ == 0 && events_.drained) events_.drained();
        },
        pid_);
  }
  return true;
}

void SpawnedChild::close_pumps() {
  if (out_) out_->close();
  if (err_) err_->close();
}

void SpawnedChild::release_held_output() {
  if (out_) out_->release();
  if (err_) err_->release();
}

void SpawnedChild::drop_held_output() {
  if (out_) out_->drop_held();
  if (err_) err_->drop_held();
}

void SpawnedChild::close_child_fds() {
  for (int fd : child_fds_) ::close(fd);
  child_fds_.clear();
}

}  // namespace cohort
