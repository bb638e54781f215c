#include "common/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace cohort::log {
namespace {

std::atomic<Level> g_level{Level::Warn};

std::shared_ptr<spdlog::logger>& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto made = spdlog::stderr_logger_mt("cohort");
    made->set_pattern("cohort %^%l%$: %v");
    made->set_level(spdlog::level::trace);
    return made;
  }();
  return instance;
}

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::Debug:
      return spdlog::level::debug;
    case Level::Info:
      return spdlog::level::info;
    case Level::Warn:
      return spdlog::level::warn;
    case Level::Error:
      return spdlog::level::err;
    case Level::Off:
      break;
  }
  return spdlog::level::off;
}

}  // namespace

void init(Level level) { g_level = level; }

Level level_from_env(Level fallback) {
  const char* value = std::getenv("LOGLEVEL");
  if (value == nullptr) return fallback;
  std::string name(value);
  if (name == "DEBUG") return Level::Debug;
  if (name == "INFO") return Level::Info;
  if (name == "WARNING" || name == "WARN") return Level::Warn;
  if (name == "ERROR" || name == "CRITICAL") return Level::Error;
  return fallback;
}

bool enabled(Level level) { return level >= g_level.load(std::memory_order_relaxed); }

// Messages quote what peers and workers sent (run ids, addresses, error texts): control bytes
// are made visible so that none of it can drive the console.
void write(Level level, std::string_view message) {
  logger()->log(to_spdlog(level), "{}", escape_for_terminal(message));
}

}  // namespace cohort::log
