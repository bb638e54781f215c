#include "common/log.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "common/console.hpp"

namespace cohort::log {
namespace {

// Formats each message and hands it to the console queue (never blocks on a console that does
// not read).
class ConsoleSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t line;
    formatter_->format(message, line);
    console::write_message(STDERR_FILENO, std::string_view(line.data(), line.size()));
  }
  void flush_() override {}
};

std::atomic<Level> g_level{Level::Warn};

std::shared_ptr<spdlog::logger>& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto made = std::make_shared<spdlog::logger>("cohort", std::make_shared<ConsoleSink>());
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
