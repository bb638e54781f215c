#include "common/fd_limit.hpp"

#include <sys/resource.h>

#include <atomic>

namespace cohort {
namespace {

// The soft limit before the first raise, or RLIM_INFINITY while nothing was raised. Lock-free,
// so a child may read it between fork and exec.
std::atomic<rlim_t> inherited_soft_limit{RLIM_INFINITY};
static_assert(std::atomic<rlim_t>::is_always_lock_free);

}  // namespace

long raise_fd_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      rlim_t unset = RLIM_INFINITY;
      inherited_soft_limit.compare_exchange_strong(unset, limit.rlim_cur);
      limit = raised;
    }
  }
  return static_cast<long>(limit.rlim_cur);
}

void restore_inherited_fd_limit() {
  rlim_t soft = inherited_soft_limit.load();
  if (soft == RLIM_INFINITY) return;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  limit.rlim_cur = soft;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace cohort
