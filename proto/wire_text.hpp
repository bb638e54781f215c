// Text as a control message carries it. encode_message writes every string as UTF-8 and turns
// bytes that are not (a reason typed in Latin-1, a login name from an old password file) into
// U+FFFD, so the far end reads other bytes than the sender had: whatever a sender proves, bounds
// or cuts must be the text as sent. Pure functions, safe on any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cohort::proto {

/// `text` as the far end decodes it from encode_message: valid UTF-8, each byte sequence that is
/// not replaced by U+FFFD exactly as the encoder replaces it.
std::string as_sent(std::string_view text);

/// Valid UTF-8 `text` cut to at most `max_bytes` at the start of a character, so that the cut
/// leaves no piece of one for the encoder to replace (which would make the text longer again).
std::string cut_at_character(std::string text, size_t max_bytes);

}  // namespace cohort::proto
