#include "proto/untrusted_json.hpp"

namespace cohort::proto {
namespace {

// Whether arrays and objects in `text` nest deeper than `max_depth`, or it holds more than
// `max_values` arrays, objects and members, counted outside strings in one pass. The scan reads
// strings as the parser's lexer does (a backslash escapes the next byte, a quote ends the
// string), so up to the point where the parser stops, both see the same structure. nlohmann's
// own parse callback would do this too, but costs time quadratic in the number of elements of an
// array of objects (64 KB of `{},` took seconds under ASan).
bool too_complex(std::string_view text, int max_depth, size_t max_values) {
  int depth = 0;
  size_t values = 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      in_string = c != '"';
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth || ++values > max_values) return true;
    } else if (c == ',') {
      if (++values > max_values) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

}  // namespace

nlohmann::json parse_untrusted_json(std::string_view text, int max_depth) {
  if (too_complex(text, max_depth, kMaxJsonValues))
    return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

}  // namespace cohort::proto
