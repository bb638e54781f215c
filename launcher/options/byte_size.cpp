#include "launcher/options/byte_size.hpp"

namespace cohort {

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  uint64_t unit = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
      case 'k':
        unit = uint64_t{1} << 10;
        break;
      case 'M':
      case 'm':
        unit = uint64_t{1} << 20;
        break;
      case 'G':
      case 'g':
        unit = uint64_t{1} << 30;
        break;
    }
    if (unit > 1) text.remove_suffix(1);
  }
  if (text.empty() || text.size() > 19) return std::nullopt;
  uint64_t number = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    number = number * 10 + static_cast<uint64_t>(c - '0');
  }
  if (number == 0 || number > (uint64_t{1} << 63) / unit) return std::nullopt;
  return number * unit;
}

std::string byte_size_problem(std::string_view flag, std::string_view text) {
  return std::string(flag) +
         ": expected a positive number of bytes with an optional K, M or G suffix (e.g. 512M), "
         "got '" +
         std::string(text) + "'";
}

}  // namespace cohort
