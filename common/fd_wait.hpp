// Waiting on one descriptor until a deadline of the steady clock: what the blocking exchanges
// outside an event loop use (a control request, the launcher's token line, the doctor's torch
// probe), so that a silent peer or child costs at most the time left. Any thread.
#pragma once

#include <chrono>

namespace cohort {

enum class FdWait { Ready, TimedOut, Failed };

/// Waits until `fd` has one of `events` (POLLIN, POLLOUT; an error or a hang-up counts as ready)
/// or `deadline` passes; an interrupted wait goes on with the time left. Failed: poll's own
/// error, in errno.
FdWait wait_for_fd(int fd, short events, std::chrono::steady_clock::time_point deadline);

}  // namespace cohort
