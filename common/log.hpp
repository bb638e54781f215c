// cohort's own diagnostics on stderr ("cohort: ..." lines), with a level set once at start from
// --verbose/--quiet or LOGLEVEL, control characters escaped (escape_for_terminal; line breaks stay,
// so a caller puts a peer's text, such as a node id, through one_line), written
// through the console queue (common/console.hpp). spdlog stays inside log.cpp so that headers
// stay light.
// init() is called once from main; the write functions are safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/text.hpp"

namespace cohort::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

/// Sets the level; says once (a warning) when LOGLEVEL is set but names no level.
void init(Level level);
/// The level in force.
Level level();
/// Sets the level without init's word on LOGLEVEL (a helper process whose parent said it).
void set_level(Level level);
/// A level by Python's logging names (DEBUG, INFO, WARNING or WARN, ERROR, CRITICAL or FATAL,
/// in any case) or numbers up to 999 (10, 20, 30, 40, 50 and those between); else nullopt.
std::optional<Level> parse_level(std::string_view name);
/// The level named by LOGLEVEL, or fallback when it is unset, empty or names none.
Level level_from_env(Level fallback);
/// "LOGLEVEL=...: expected ..." when LOGLEVEL is set, not empty, and names no level; else empty.
std::string level_env_problem();
bool enabled(Level level);
void write(Level level, std::string_view message);

template <typename... Parts>
void debug(const Parts&... parts) {
  if (enabled(Level::Debug)) write(Level::Debug, cat(parts...));
}
template <typename... Parts>
void info(const Parts&... parts) {
  if (enabled(Level::Info)) write(Level::Info, cat(parts...));
}
template <typename... Parts>
void warn(const Parts&... parts) {
  if (enabled(Level::Warn)) write(Level::Warn, cat(parts...));
}
template <typename... Parts>
void error(const Parts&... parts) {
  if (enabled(Level::Error)) write(Level::Error, cat(parts...));
}

}  // namespace cohort::log
