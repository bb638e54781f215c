#include "common/random_bits.hpp"

#include <sys/random.h>

#include <cerrno>
#include <stdexcept>

namespace cohort {

void random_bytes(void* into, size_t size) {
  auto* bytes = static_cast<unsigned char*>(into);
  for (size_t filled = 0; filled < size;) {
    ssize_t got = ::getrandom(bytes + filled, size - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw std::runtime_error("no random bytes from the system");
    filled += static_cast<size_t>(got);
  }
}

uint64_t random_u64() {
  uint64_t value = 0;
  random_bytes(&value, sizeof value);
  return value;
}

}  // namespace cohort
