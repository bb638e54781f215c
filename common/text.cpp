#include "common/text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace cohort {
namespace {

// The length of the valid UTF-8 sequence of 2 to 4 bytes that starts at text[at], else 0
// (stray continuation bytes, overlong forms, surrogates, code points past U+10FFFF, truncation).
size_t utf8_sequence(std::string_view text, size_t at) {
  auto byte = [&](size_t i) {
    return at + i < text.size() ? static_cast<unsigned char>(text[at + i]) : 0;
  };
  unsigned char lead = byte(0);
  if (lead < 0xc2 || lead > 0xf4) return 0;
  size_t length = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
  unsigned char low = lead == 0xe0 ? 0xa0 : lead == 0xf0 ? 0x90 : 0x80;   // the second byte's
  unsigned char high = lead == 0xed ? 0x9f : lead == 0xf4 ? 0x8f : 0xbf;  // range
  if (byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
  }
  return length;
}

// U+200E, U+200F, U+202A..U+202E and U+2066..U+2069 as UTF-8: marks and overrides that make a
// terminal show what follows in another order (a forged line, a file name that reads backwards).
bool is_bidi_control(std::string_view sequence) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(sequence[i]); };
  if (byte(0) != 0xe2) return false;
  if (byte(1) == 0x80) {
    return byte(2) == 0x8e || byte(2) == 0x8f || (byte(2) >= 0xaa && byte(2) <= 0xae);
  }
  return byte(1) == 0x81 && byte(2) >= 0xa6 && byte(2) <= 0xa9;
}

}  // namespace

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

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  size_t at = 0;
  for (;;) {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
    if (at == text.size()) return words;
    size_t end = at;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
    words.emplace_back(text.substr(at, end - at));
    at = end;
  }
}

namespace {

// Inside "...": a backslash escapes only these (and a newline, which it removes).
bool escapable_in_double_quotes(char c) { return c == '$' || c == '`' || c == '"' || c == '\\'; }

// Appends the quoted text that starts at `at` (just past the opening quote) to `word`; the index
// just past the closing quote, or npos when there is none.
size_t take_quoted(std::string_view text, size_t at, char quote, std::string& word) {
  for (; at < text.size(); ++at) {
    char c = text[at];
    if (c == quote) return at + 1;
    if (quote == '"' && c == '\\' && at + 1 < text.size()) {
      char next = text[at + 1];
      if (next == '\n') {
        ++at;
        continue;
      }
      if (escapable_in_double_quotes(next)) c = text[++at];
    }
    word.push_back(c);
  }
  return std::string_view::npos;
}

}  // namespace

std::optional<std::vector<std::string>> split_shell_words(std::string_view text,
                                                          std::string& error) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t at = 0; at < text.size();) {
    char c = text[at];
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      ++at;
    } else if (c == '\'' || c == '"') {
      in_word = true;
      at = take_quoted(text, at + 1, c, word);
      if (at == std::string_view::npos) {
        error = cat("a ", c, " is not closed");
        return std::nullopt;
      }
    } else if (c == '\\') {
      if (at + 1 == text.size()) {
        error = "a \\ ends the text, with nothing after it to escape";
        return std::nullopt;
      }
      if (text[at + 1] != '\n') {
        word.push_back(text[at + 1]);
        in_word = true;
      }
      at += 2;
    } else {
      word.push_back(c);
      in_word = true;
      ++at;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string joined;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) joined += separator;
    joined += parts[i];
  }
  return joined;
}

std::string_view trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

bool is_variable_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_'; });
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

std::string format_duration(std::chrono::milliseconds duration) {
  int64_t ms = std::max<int64_t>(0, duration.count());
  if (ms < 10'000) return cat(ms / 1000, ".", ms % 1000 / 100, "s");
  int64_t seconds = (ms + 500) / 1000;
  if (seconds < 60) return cat(seconds, "s");
  auto padded = [](int64_t n) { return cat(n < 10 ? "0" : "", n); };
  if (seconds < 3600) return cat(seconds / 60, "m", padded(seconds % 60), "s");
  return cat(seconds / 3600, "h", padded(seconds / 60 % 60), "m");
}

namespace {

// The identifier `text` starts with, as string.Template reads one: [_a-zA-Z][_a-zA-Z0-9]*.
std::string_view identifier_at(std::string_view text) {
  auto letter = [](char c) { return c == '_' || std::isalpha(static_cast<unsigned char>(c)); };
  if (text.empty() || !letter(text[0])) return {};
  size_t end = 1;
  while (end < text.size() &&
         (letter(text[end]) || std::isdigit(static_cast<unsigned char>(text[end]))))
    ++end;
  return text.substr(0, end);
}

}  // namespace

std::string substitute(std::string_view text, std::string_view name, std::string_view value) {
  std::string out;
  size_t at = 0;
  for (size_t dollar = text.find('$'); dollar != std::string_view::npos;
       dollar = text.find('$', at)) {
    out.append(text.substr(at, dollar - at));
    std::string_view rest = text.substr(dollar + 1);
    bool braced = rest.starts_with('{');
    std::string_view id = identifier_at(rest.substr(braced ? 1 : 0));
    bool closed = !braced || rest.substr(1 + id.size()).starts_with('}');
    if (rest.starts_with('$')) {
      out += '$';
      at = dollar + 2;
    } else if (!id.empty() && closed && id == name) {
      out.append(value);
      at = dollar + 1 + id.size() + (braced ? 2 : 0);
    } else {  // not ours: kept, and what follows read as text
      out += '$';
      at = dollar + 1;
    }
  }
  out.append(text.substr(at));
  return out;
}

std::string cut_middle(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::string mark = "\n[... " + std::to_string(text.size()) + " bytes, cut to fit ...]\n";
  if (max_bytes <= mark.size()) return std::string(text.substr(0, max_bytes));
  size_t kept = max_bytes - mark.size();
  size_t head = kept / 4;
  return cat(text.substr(0, head), mark, text.substr(text.size() - (kept - head)));
}

std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\n' || c == '\r') {
      out += c == '\n' ? "\\n" : "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

std::string escape_for_terminal(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    auto byte = static_cast<unsigned char>(text[at]);
    bool crlf = byte == '\r' && text.substr(at + 1, 1) == "\n";
    if ((byte >= 0x20 && byte < 0x7f) || byte == '\n' || byte == '\t' || crlf) {
      out += text[at++];
      continue;
    }
    size_t length = byte >= 0x80 ? utf8_sequence(text, at) : 0;
    if (length == 3 && is_bidi_control(text.substr(at, 3))) {
      out += "\\u20";
      unsigned low = (static_cast<unsigned char>(text[at + 1]) & 0x3) << 6 |
                     (static_cast<unsigned char>(text[at + 2]) & 0x3f);
      out += kHex[low >> 4];
      out += kHex[low & 0xf];
      at += 3;
      continue;
    }
    bool c1 = byte == 0xc2 && length == 2 && static_cast<unsigned char>(text[at + 1]) < 0xa0;
    if (length > 0 && !c1) {
      out += text.substr(at, length);
      at += length;
      continue;
    }
    for (size_t end = at + (c1 ? 2 : 1); at < end; ++at) {
      auto shown = static_cast<unsigned char>(text[at]);
      out += "\\x";
      out += kHex[shown >> 4];
      out += kHex[shown & 0xf];
    }
  }
  return out;
}

}  // namespace cohort
