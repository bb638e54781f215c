#include "launcher/options/rdzv_conf.hpp"

#include <map>

#include "common/text.hpp"

namespace cohort {
namespace {

std::optional<std::chrono::milliseconds> seconds_value(const std::string& text) {
  auto seconds = parse_double(text);
  if (!seconds || *seconds <= 0) return std::nullopt;
  return seconds_to_ms(*seconds);
}

double seconds_of(std::chrono::milliseconds ms) { return static_cast<double>(ms.count()) / 1000; }

// The heartbeat timeout against its floors; `origin` says where it came from.
void check_heartbeat(const RdzvConf& conf, const std::string& origin,
                     std::vector<std::string>& problems) {
  double timeout = seconds_of(conf.heartbeat_timeout);
  if (timeout > kMaxSeconds) {
    problems.push_back(
        cat("--rdzv-conf: heartbeat_timeout (", timeout, " s", origin, ") must be at most a year"));
  } else if (conf.heartbeat_timeout < kMinHeartbeatTimeout) {
    problems.push_back(cat("--rdzv-conf: heartbeat_timeout (", timeout, " s", origin,
                           ") must be at least ", seconds_of(kMinHeartbeatTimeout), " s"));
  } else if (conf.heartbeat_timeout < 2 * conf.heartbeat_interval) {
    problems.push_back(cat("--rdzv-conf: heartbeat_timeout (", timeout, " s", origin,
                           ") must be at least twice keep_alive_interval (",
                           seconds_of(conf.heartbeat_interval), " s)"));
  }
}

// As torchrun's RendezvousParameters.get_as_bool reads one, in any case.
std::optional<bool> bool_value(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* yes : {"1", "true", "t", "yes", "y"})
    if (text == yes) return true;
  for (const char* no : {"0", "false", "f", "no", "n"})
    if (text == no) return false;
  return std::nullopt;
}

}  // namespace

RdzvConf parse_rdzv_conf(const std::string& text, std::vector<std::string>& problems) {
  RdzvConf conf;
  int64_t max_attempts = 0;  // 0: not given, or refused
  bool timeout_given = false;
  if (trim(text).empty()) return conf;
  for (const auto& item : split(text, ',')) {
    size_t equals = item.find('=');
    std::string key(trim(item.substr(0, equals)));
    std::string value(equals == std::string::npos ? "" : trim(item.substr(equals + 1)));
    auto bad = [&](const char* expected) {
      problems.push_back(cat("--rdzv-conf: ", key, "=", value, ": expected ", expected));
    };
    auto set_seconds = [&](std::chrono::milliseconds& field,
                           std::chrono::milliseconds floor = std::chrono::milliseconds(1)) {
      auto parsed = seconds_value(value);
      if (!parsed) return bad("a positive number of seconds, at most a year");
      if (*parsed < floor)
        return problems.push_back(
            cat("--rdzv-conf: ", key, "=", value, ": at least ", seconds_of(floor), " s"));
      field = *parsed;
    };
    if (equals == std::string::npos) {
      problems.push_back(cat("--rdzv-conf: '", item, "' is not key=value"));
    } else if (key == "join_timeout") {
      set_seconds(conf.join_timeout);
    } else if (key == "last_call_timeout") {
      set_seconds(conf.last_call_timeout);
    } else if (key == "heartbeat_timeout") {
      set_seconds(conf.heartbeat_timeout, kMinHeartbeatTimeout);
      timeout_given = true;
    } else if (key == "keep_alive_interval" || key == "heartbeat_interval") {
      set_seconds(conf.heartbeat_interval, kMinHeartbeatInterval);
    } else if (key == "keep_alive_max_attempt") {
      // A refused count sets nothing: a huge one would overflow the timeout it multiplies.
      std::optional<int64_t> count = parse_int(value);
      bool valid = count && *count >= 1 && *count <= 1000;
      max_attempts = valid ? *count : 0;
      if (!valid) bad("a count from 1 to 1000");
    } else if (key == "is_host") {
      conf.is_host = bool_value(value);
      if (!conf.is_host) bad("1, true, t, yes, y, or 0, false, f, no, n");
    } else if (key == "store_type") {
      if (value != "tcp") bad("tcp (cohort's daemon holds the state; no file store)");
    } else if (key == "close_timeout" || key == "timeout" || key == "read_timeout" ||
               key == "rank") {
      // torchrun's store and static-backend settings: nothing to tune in cohort's daemon, but
      // torchrun refuses what is not a whole number, and so a typo shows.
      if (!parse_int(value)) bad("a whole number");
    } else if (key == "use_libuv") {
      if (!bool_value(value)) bad("1, true, t, yes, y, or 0, false, f, no, n");
    } else {  // torchrun passes any key on to its backend, which may read it
      conf.unknown_keys.push_back(key);
    }
  }
  std::string origin;
  if (max_attempts > 0 && !timeout_given) {
    conf.heartbeat_timeout = conf.heartbeat_interval * max_attempts;
    origin = cat(": keep_alive_interval x keep_alive_max_attempt=", max_attempts);
  }
  check_heartbeat(conf, origin, problems);
  return conf;
}

}  // namespace cohort
