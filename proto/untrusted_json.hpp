// Parsing JSON that someone else wrote (a peer's control frame, a daemon's status reply, a
// worker's error file), with the nesting depth checked before the parser runs: no input can make
// the parser, a later walk over the value or its destructor recurse past kMaxJsonDepth, and
// the time taken grows linearly with the text.
// Pure; any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace cohort::proto {

/// Deeper than any message of the protocol (5: a status_reply's nodes) or an error file of
/// PyTorch's (3) will ever be.
constexpr int kMaxJsonDepth = 32;

/// The parsed value, or a discarded one (`is_discarded()`) when `text` is not JSON or nests
/// arrays and objects more than `max_depth` deep.
nlohmann::json parse_untrusted_json(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace cohort::proto
