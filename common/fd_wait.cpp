#include "common/fd_wait.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace cohort {

FdWait wait_for_fd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return FdWait::TimedOut;
    pollfd entry{fd, events, 0};
    int ready = ::poll(&entry, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (ready > 0) return FdWait::Ready;
    if (ready < 0 && errno != EINTR) return FdWait::Failed;
  }
}

}  // namespace cohort
