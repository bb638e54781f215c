#include "common/text.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace cohort {

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::string_view trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

std::optional<int64_t> parse_int(std::string_view text) {
  int64_t value = 0;
  const char* first = text.data();
  if (!text.empty() && text.front() == '+') ++first;
  auto [end, ec] = std::from_chars(first, text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> parse_double(std::string_view text) {
  std::string copy(trim(text));
  if (copy.empty()) return std::nullopt;
  char* end = nullptr;
  double value = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size()) return std::nullopt;
  return value;
}

std::optional<std::chrono::milliseconds> seconds_to_ms(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > kMaxSeconds) return std::nullopt;
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

std::optional<std::chrono::milliseconds> parse_seconds(std::string_view text) {
  auto seconds = parse_double(text);
  if (!seconds) return std::nullopt;
  return seconds_to_ms(*seconds);
}

std::string substitute(std::string text, std::string_view name, std::string_view value) {
  std::string token = "${" + std::string(name) + "}";
  for (size_t at = text.find(token); at != std::string::npos;
       at = text.find(token, at + value.size())) {
    text.replace(at, token.size(), value);
  }
  return text;
}

}  // namespace cohort
