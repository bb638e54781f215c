// Small string helpers shared by every layer: concatenation for messages, splitting, trimming,
// strict integer parsing, escaping for terminals. Pure functions, safe on any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

/// Concatenates anything streamable: cat("rank=", 3, " of ", 4).
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

std::vector<std::string> split(std::string_view text, char separator);
/// The words of `text`: what lies between runs of whitespace (none for blank text).
std::vector<std::string> split_words(std::string_view text);
/// The words a POSIX shell makes of `text`, quotes and backslashes removed ("--comment='two
/// words'" is one word), without expanding anything ($HOME, *, ~ stay as they are); nullopt with
/// `error` set ("a ' is not closed") where the shell would wait for more.
std::optional<std::vector<std::string>> split_shell_words(std::string_view text,
                                                          std::string& error);
/// The parts with `separator` between them.
std::string join(const std::vector<std::string>& parts, std::string_view separator);
std::string_view trim(std::string_view text);
/// A name a shell can export: letters, digits and '_', not starting with a digit.
bool is_variable_name(std::string_view name);
/// Whole-string base-10 integer; nullopt on junk, sign where unsigned, or overflow.
std::optional<int64_t> parse_int(std::string_view text);
std::optional<double> parse_double(std::string_view text);

/// The longest time a flag, a setting or the protocol may give: a year.
constexpr double kMaxSeconds = 365.0 * 24 * 3600;
/// Seconds as milliseconds when finite, >= 0 and at most kMaxSeconds; nullopt for NaN, infinity,
/// negative or huge values (which would overflow a duration).
std::optional<std::chrono::milliseconds> seconds_to_ms(double seconds);
/// parse_double, then seconds_to_ms.
std::optional<std::chrono::milliseconds> parse_seconds(std::string_view text);
/// A duration as a person reads it: "0.4s", "12s", "9m50s", "2h05m" (shorter units dropped once
/// hours are shown).
std::string format_duration(std::chrono::milliseconds duration);
/// `text` as Python's string.Template(text).safe_substitute({name: value}) gives it, which is how
/// torchrun expands its script's arguments: "$name" and "${name}" become the value, "$$" a "$",
/// and any other "$" (another name, "${", a lone one) stays as it is.
std::string substitute(std::string_view text, std::string_view name, std::string_view value);
/// Text from elsewhere (a worker's output, a peer's message) made safe to print on a terminal:
/// every byte that a terminal could act on is shown as a visible "\xHH" (ESC as "\x1b", so an
/// escape sequence prints as inert text): C0 controls except \n and \t (and the \r of "\r\n"),
/// DEL, C1 controls both as raw bytes and as UTF-8 (U+0080..U+009F, such as U+009B CSI), and
/// bytes that are not valid UTF-8, and the bidirectional controls that reorder what follows
/// (U+200E/F, U+202A..U+202E, U+2066..U+2069, shown as "\u202e"). Other valid UTF-8 and
/// backslashes are kept as they are.
std::string escape_for_terminal(std::string_view text);
/// Text from elsewhere (an agent's node id or reason, a client's key) on one line: every \n and \r
/// as a visible "\\n" and "\\r", so that it cannot forge lines of its own in a log that
/// escape_for_terminal then makes safe; everything else as it is.
std::string one_line(std::string_view text);
/// `text` cut to at most `max_bytes` by dropping its middle, marked "[... N bytes cut ...]": the
/// first quarter and the end stay (a failure summary's root cause is at its end).
std::string cut_middle(std::string_view text, size_t max_bytes);

}  // namespace cohort
