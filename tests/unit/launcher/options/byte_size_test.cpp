#include <catch2/catch.hpp>

#include "launcher/options/byte_size.hpp"

using cohort::parse_byte_size;

TEST_CASE("byte sizes: digits with an optional K, M or G suffix", "[unit][launcher][store]") {
  CHECK(parse_byte_size("1") == 1u);
  CHECK(parse_byte_size("4096") == 4096u);
  CHECK(parse_byte_size("64K") == 64u * 1024);
  CHECK(parse_byte_size("64k") == 64u * 1024);
  CHECK(parse_byte_size("512M") == 512u * 1024 * 1024);
  CHECK(parse_byte_size("1G") == uint64_t{1} << 30);
  CHECK(parse_byte_size("8589934592G") == uint64_t{1} << 63);
  for (const char* bad : {"", "0", "0G", "G", "-1", "1.5G", "1T", "1 G", "1GB", " 1", "8589934593G",
                          "99999999999999999999"}) {
    INFO(bad);
    CHECK_FALSE(parse_byte_size(bad));
  }
}
