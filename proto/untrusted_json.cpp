#include "proto/untrusted_json.hpp"

namespace cohort::proto {
namespace {

struct TooDeep {};  // thrown from the parser callback: nlohmann has no other way to stop early

}  // namespace

nlohmann::json parse_untrusted_json(std::string_view text, int max_depth) {
  // `depth` is the number of arrays and objects already open when a new one starts.
  auto limit_depth = [max_depth](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    bool opens = event == nlohmann::json::parse_event_t::object_start ||
                 event == nlohmann::json::parse_event_t::array_start;
    if (opens && depth >= max_depth) throw TooDeep{};
    return true;
  };
  try {
    return nlohmann::json::parse(text, limit_depth, /*allow_exceptions=*/false);
  } catch (const TooDeep&) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
}

}  // namespace cohort::proto
