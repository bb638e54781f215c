// Suggestions for a mistyped command or flag ("--rdzv-endpiont": did you mean --rdzv-endpoint?):
// the closest known name by edit distance, when it is close enough to be what was meant. Pure
// functions (and one reading a CLI11 command's flag names), main thread at start.
#pragma once

#include <string>
#include <vector>

#include "launcher/options/cli_fwd.hpp"

namespace cohort {

/// The candidate closest to `word` by edit distance (insert, delete, substitute, swap of two
/// neighbours), when it is at most 2 edits and at most a third of `word` away; else empty.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);

/// Every long flag of `command` as typed ("--rdzv-endpoint", "--rdzv_endpoint", ...).
std::vector<std::string> flag_names(const CLI::App& command);

/// "unknown argument '--prot' (did you mean --port?)", or without the suggestion.
std::string unknown_argument(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace cohort
