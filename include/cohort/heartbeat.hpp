// Heartbeats from a C++ training worker to the cohort agent that started it, header-only and
// without dependencies: cohort gives every worker COHORT_HEARTBEAT_FD, a pipe the agent reads;
// each write is one sign of life, "step N\n" also reports the training step. With
// `cohort run --hang-timeout S`, a worker silent for S seconds is declared hung and restarted.
// Not under cohort (no COHORT_HEARTBEAT_FD), beat() does nothing, and so it does in a process that
// inherited the variable but not the pipe (a child the worker started with its descriptors
// closed), whatever file has that descriptor number there. Any thread.
//
//   for (int64_t step = 0; ...; ++step) { train_step(); cohort::heartbeat::beat(step); }
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace cohort::heartbeat {

/// Whether `fd` is a pipe, as the one cohort gives its workers is. The variable outlives the
/// descriptor: a child process inherits COHORT_HEARTBEAT_FD but, unless it was passed on, not the
/// pipe, and the number may be a file it opened since, which a heartbeat must not write into.
inline bool is_pipe(int fd) {
  struct stat info {};
  return ::fstat(fd, &info) == 0 && S_ISFIFO(info.st_mode);
}

/// The descriptor from COHORT_HEARTBEAT_FD, or -1 when not under cohort or when, at first use, it
/// is no pipe.
inline int descriptor() {
  static const int fd = [] {
    const char* text = std::getenv("COHORT_HEARTBEAT_FD");
    if (text == nullptr || *text == '\0') return -1;
    char* end = nullptr;
    long value = std::strtol(text, &end, 10);
    if (*end != '\0' || value < 0 || value >= 1 << 20) return -1;
    return is_pipe(static_cast<int>(value)) ? static_cast<int>(value) : -1;
  }();
  return fd;
}

/// One sign of life, reporting `step` when it is >= 0. Never blocks (the pipe is non-blocking:
/// a full one drops the beat) and never throws. Returns true if the beat was written.
inline bool beat(int64_t step = -1) {
  int fd = descriptor();
  if (fd < 0) return false;
  char line[32];
  int size = step >= 0
                 ? std::snprintf(line, sizeof line, "step %lld\n", static_cast<long long>(step))
                 : std::snprintf(line, sizeof line, "\n");
  ssize_t wrote;
  do {
    wrote = ::write(fd, line, static_cast<size_t>(size));
  } while (wrote < 0 && errno == EINTR);
  return wrote == size;
}

}  // namespace cohort::heartbeat
