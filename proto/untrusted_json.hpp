// Parsing JSON that someone else wrote (a peer's control frame, a daemon's status reply, a
// worker's error file), with the nesting depth and the number of values checked before the
// parser runs: no input can make the parser, a later walk over the value or its destructor
// recurse past kMaxJsonDepth, the time taken grows linearly with the text, and the memory
// with the values a real message holds (not with `[{},{},...]` packed into a 64 MiB reply).
// Pure; any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace cohort::proto {

/// Deeper than any message of the protocol (5: a status_reply's nodes) or an error file of
/// PyTorch's (3) will ever be.
constexpr int kMaxJsonDepth = 32;
/// Arrays, objects, elements and members: more than a 64 MiB status reply of real nodes holds
/// (about 3.5 million: a node is 8 values in 150 bytes; 100,000 nodes, 800,000).
constexpr size_t kMaxJsonValues = 4'000'000;

/// The parsed value, or a discarded one (`is_discarded()`) when `text` is not JSON, nests
/// arrays and objects more than `max_depth` deep, or holds more than kMaxJsonValues values.
nlohmann::json parse_untrusted_json(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace cohort::proto
