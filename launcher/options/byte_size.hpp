// A size in bytes as the flags write it (--store-quota 512M): digits with an optional K, M or G
// suffix. Shared by cohortd's flags and `cohort run`'s embedded daemon. Pure; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cohort {

/// Digits with an optional K, M or G suffix (powers of 1024, either case); nullopt when
/// malformed, zero or past 2^63.
std::optional<uint64_t> parse_byte_size(std::string_view text);
/// What to say of `text` given to `flag` when parse_byte_size refuses it.
std::string byte_size_problem(std::string_view flag, std::string_view text);

}  // namespace cohort
