#include "common/event_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "common/console.hpp"
#include "common/log.hpp"

namespace cohort {
namespace {

// "2026-11-23T19:07:12.345Z"
std::string iso8601_utc(int64_t t_ms) {
  std::time_t seconds = static_cast<std::time_t>(t_ms / 1000);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char text[40];
  size_t length = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &parts);
  std::snprintf(text + length, sizeof text - length, ".%03dZ", static_cast<int>(t_ms % 1000));
  return text;
}

// write(2) until the whole line is out or an error; a line is short next to a pipe's or a
// file's atomic size in practice, so this loops only when interrupted.
bool write_all(int fd, const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    ssize_t wrote = ::write(fd, line.data() + done, line.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return false;
    done += static_cast<size_t>(wrote);
  }
  return true;
}

}  // namespace

bool is_envelope_key(std::string_view key) {
  return key == "time" || key == "t_ms" || key == "source" || key == "seq" || key == "run" ||
         key == "event";
}

std::string format_event_line(const Event& event, std::string_view source, uint64_t seq,
                              int64_t t_ms) {
  std::string line =
      "{\"time\":\"" + iso8601_utc(t_ms) + "\",\"t_ms\":" + std::to_string(t_ms) +
      ",\"source\":" + nlohmann::json(source).dump() + ",\"seq\":" + std::to_string(seq) +
      ",\"run\":" +
      nlohmann::json(event.run).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
      ",\"event\":" + nlohmann::json(event.name).dump();
  if (event.fields.is_object()) {
    for (const auto& [key, value] : event.fields.items()) {
      if (is_envelope_key(key)) continue;  // a second "seq" would hide the line's own from readers
      line += ',' + nlohmann::json(key).dump() + ':' +
              value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  line += "}\n";
  return line;
}

namespace {

// Opens (creating, owner-only) the log for appending, without following a symbolic link at the
// path: one planted there would send the events (and the creation) wherever it points.
int open_event_log(const std::string& path, std::string& problem) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) return fd;
  problem = errno == ELOOP ? path + ": is a symbolic link (refused; name the file itself)"
                           : path + ": " + std::strerror(errno);
  return -1;
}

}  // namespace

std::string event_log_problem(const std::string& path) {
  std::string problem;
  int fd = open_event_log(path, problem);
  if (fd >= 0) ::close(fd);
  return problem;
}

int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::string EventLog::open(const std::string& path) {
  std::string problem;
  int fd = open_event_log(path, problem);
  if (fd < 0) return problem;
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  path_ = path;
  return {};
}

std::string EventLog::record(const Event& event, int64_t t_ms) {
  std::string line = format_event_line(event, source_, ++seq_, t_ms);
  append(line);
  return line;
}

void EventLog::append(const std::string& line) {
  if (fd_ >= 0 && !write_all(fd_, line) && !write_failed_) {
    write_failed_ = true;
    log::warn("event log ", path_, ": cannot write (", std::strerror(errno),
              "); events are not being recorded there");
  }
  if (echo_) console::write_message(STDERR_FILENO, line);
}

std::vector<nlohmann::json> parse_event_lines(std::string_view text) {
  std::vector<nlohmann::json> events;
  size_t start = 0;
  for (size_t end = text.find('\n'); end != std::string_view::npos;
       start = end + 1, end = text.find('\n', start)) {
    nlohmann::json event = nlohmann::json::parse(text.substr(start, end - start), nullptr, false);
    if (event.is_object()) events.push_back(std::move(event));
  }
  return events;  // text after the last '\n' is a torn line
}

std::vector<nlohmann::json> read_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return parse_event_lines(text.str());
}

}  // namespace cohort
