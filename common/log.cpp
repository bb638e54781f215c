#include "common/log.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
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

void init(Level level) {
  g_level = level;
  if (std::string problem = level_env_problem(); !problem.empty()) warn(problem);
}

Level level() { return g_level; }

void set_level(Level level) { g_level = level; }

std::optional<Level> parse_level(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "DEBUG") return Level::Debug;
  if (upper == "INFO") return Level::Info;
  if (upper == "WARNING" || upper == "WARN") return Level::Warn;
  if (upper == "ERROR" || upper == "CRITICAL" || upper == "FATAL") return Level::Error;
  if (upper.empty() || upper.size() > 3 ||
      upper.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  int number = std::stoi(upper);  // as Python's: a message shows at or above the number
  if (number <= 10) return Level::Debug;
  if (number <= 20) return Level::Info;
  if (number <= 30) return Level::Warn;
  return Level::Error;
}

Level level_from_env(Level fallback) {
  const char* value = std::getenv("LOGLEVEL");
  if (value == nullptr || *value == '\0') return fallback;
  return parse_level(value).value_or(fallback);
}

std::string level_env_problem() {
  const char* value = std::getenv("LOGLEVEL");
  if (value == nullptr || *value == '\0' || parse_level(value)) return "";
  return "LOGLEVEL=" + escape_for_terminal(value) +
         ": expected DEBUG, INFO, WARNING, ERROR or CRITICAL (or a number such as 20); it is "
         "ignored";
}

bool enabled(Level level) { return level >= g_level.load(std::memory_order_relaxed); }

// Messages quote what peers and workers sent (run ids, addresses, error texts): control bytes
// are made visible so that none of it can drive the console.
void write(Level level, std::string_view message) {
  logger()->log(to_spdlog(level), "{}", escape_for_terminal(message));
}

}  // namespace cohort::log
