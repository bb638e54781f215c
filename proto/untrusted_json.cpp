#include "proto/untrusted_json.hpp"

namespace cohort::proto {
namespace {

// Whether arrays and objects in `text` nest deeper than `max_depth`, counted outside strings in
// one pass. The scan reads strings as the parser's lexer does (a backslash escapes the next byte,
// a quote ends the string), so up to the point where the parser stops, both see the same depth.
// nlohmann's own parse callback would do this too, but costs time quadratic in the number of
// elements of an array of objects (64 KB of `{},` took seconds under ASan).
bool nests_deeper_than(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      in_string = c != '"';
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

}  // namespace

nlohmann::json parse_untrusted_json(std::string_view text, int max_depth) {
  if (nests_deeper_than(text, max_depth)) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

}  // namespace cohort::proto
