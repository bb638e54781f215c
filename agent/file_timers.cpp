#include "agent/file_timers.hpp"

#include <cmath>

#include <cstdint>
#include <nlohmann/json.hpp>

namespace cohort {

std::optional<TimerRequest> parse_timer_request(std::string_view line, std::string& error) {
  nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) {
    error = "not a JSON object";
    return std::nullopt;
  }
  auto pid = json.find("pid");
  auto scope = json.find("scope_id");
  auto expiration = json.find("expiration_time");
  auto signal = json.find("signal");
  if (pid == json.end() || !pid->is_number_integer() || scope == json.end() ||
      !scope->is_string() || expiration == json.end() || !expiration->is_number() ||
      (signal != json.end() && !signal->is_number_integer())) {
    error = "expected pid, scope_id, expiration_time and signal";
    return std::nullopt;
  }
  int64_t pid_value = pid->get<int64_t>();
  int64_t signal_value = signal == json.end() ? 0 : signal->get<int64_t>();
  if (pid_value <= 0 || pid_value > INT32_MAX) {
    error = "pid out of range";
    return std::nullopt;
  }
  if (signal_value < -1 || signal_value > 64) {
    error = "signal out of range";
    return std::nullopt;
  }
  TimerRequest request;
  request.pid = static_cast<pid_t>(pid_value);
  request.scope = scope->get<std::string>();
  request.expiration_time = expiration->get<double>();
  request.signal = static_cast<int>(signal_value);
  return request;
}

bool FileTimers::apply(const TimerRequest& request) {
  auto key = std::make_pair(request.pid, request.scope);
  if (request.expiration_time < 0) {
    timers_.erase(key);
    return true;
  }
  if (timers_.size() >= kMaxTimers && timers_.count(key) == 0) return false;
  timers_[key] = request;
  return true;
}

void FileTimers::postpone(double seconds) {
  for (auto& [key, timer] : timers_) timer.expiration_time += seconds;
}

std::chrono::milliseconds timer_wait(double expiration, double now) {
  double seconds = expiration - now;
  if (!(seconds > 0)) return std::chrono::milliseconds(0);
  constexpr double kLongest = std::chrono::duration<double>(kMaxTimerWait).count();
  if (seconds >= kLongest) return kMaxTimerWait;
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
}

std::optional<double> FileTimers::next_expiration() const {
  std::optional<double> earliest;
  for (const auto& [key, timer] : timers_) {
    if (timer.signal <= 0) continue;
    if (!earliest || timer.expiration_time < *earliest) earliest = timer.expiration_time;
  }
  return earliest;
}

std::vector<ExpiredTimer> FileTimers::take_expired(double now) {
  std::map<pid_t, ExpiredTimer> first;  // per pid, the earliest expired timer that reaps
  for (const auto& [key, timer] : timers_) {
    if (timer.signal <= 0 || timer.expiration_time > now) continue;
    auto found = first.find(timer.pid);
    if (found == first.end() || timer.expiration_time < found->second.expiration_time)
      first[timer.pid] = {timer.pid, timer.signal, timer.scope, timer.expiration_time};
  }
  std::vector<ExpiredTimer> expired;
  for (const auto& [pid, timer] : first) {
    expired.push_back(timer);
    std::erase_if(timers_, [pid = pid](const auto& entry) { return entry.first.first == pid; });
  }
  return expired;
}

}  // namespace cohort
