// Random bytes and numbers from the kernel's generator (getrandom), for nonces, run ids and
// jitter, in one place: not OpenSSL's generator, whose set-up costs half a millisecond of every
// launch, nor std::random_device, whose code in the libstdc++ the binaries carry may call glibc
// 2.36's arc4random (which the binaries reach only through launcher/cli/arc4random_wrap.cpp).
// Any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cohort {

/// Fills `size` bytes at `into`; throws std::runtime_error if the kernel gives none (it blocks
/// only until its generator is seeded at boot).
void random_bytes(void* into, size_t size);

/// A uniformly random 64-bit number.
uint64_t random_u64();

}  // namespace cohort
