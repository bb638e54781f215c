#include "common/random_bits.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <set>
#include <vector>

using namespace cohort;

TEST_CASE("random bytes fill the whole buffer, and differ from one draw to the next",
          "[unit][common]") {
  // 1 MiB in one call: getrandom may return fewer bytes than asked; every byte must be written.
  std::vector<unsigned char> big(1 << 20, 0);
  random_bytes(big.data(), big.size());
  std::array<size_t, 256> counts{};
  for (unsigned char byte : big) ++counts[byte];
  for (size_t count : counts) CHECK(count > 3000);  // 4096 expected; zeros left would show here

  std::set<uint64_t> drawn;
  for (int i = 0; i < 64; ++i) drawn.insert(random_u64());
  CHECK(drawn.size() == 64);
}
