// The binaries carry libstdc++ (launcher/CMakeLists.txt), whose std::random_device code, linked in
// with its old-ABI strings whether used or not, asks for arc4random: a glibc 2.36 function that
// would keep cohort off nodes with glibc 2.34 or 2.35 (Ubuntu 22.04, RHEL 9). The link sends that
// reference here (-Wl,--wrap=arc4random); cohort itself draws its random numbers from
// common/random_bits.hpp, as this does. Linked into cohort and cohortd only.
#include <cstdint>

#include "common/random_bits.hpp"

extern "C" uint32_t __wrap_arc4random() { return static_cast<uint32_t>(cohort::random_u64()); }
