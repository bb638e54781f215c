#include "rendezvous/daemon_pages.hpp"

#include <cctype>

#include "observe/status_pages.hpp"
#include "observe/timeline.hpp"

namespace cohort {
namespace {

constexpr const char* kHtml = "text/html; charset=utf-8";
constexpr const char* kJson = "application/json";
constexpr const char* kPrometheus = "text/plain; version=0.0.4; charset=utf-8";

// The path a client asked for, echoed with every control byte (CR, LF, NUL, ESC...) as \xNN: a
// decoded %0d%0a cannot add lines to the body, nor a %1b reach whoever reads it in a terminal.
std::string inert(const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out;
}

observe::HttpResponse not_found(const std::string& what) {
  return {404, "text/plain; charset=utf-8", inert(what) + "\n"};
}

// "/runs/job%2042" -> "job 42": run ids are plain names, but a browser may escape anything.
std::string decoded(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() &&
        std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

bool known_run(const proto::StatusReply& status, const std::vector<nlohmann::json>& events,
               const std::string& run_id) {
  if (!events.empty()) return true;
  for (const auto& run : status.runs)
    if (run.run_id == run_id) return true;
  return false;
}

}  // namespace

observe::HttpResponse DaemonPages::answer(const std::string& target) const {
  std::string path = target.substr(0, target.find('?'));
  if (path == "/metrics") return {200, kPrometheus, metrics_.render(view_.snapshot())};
  if (path == "/") {
    return {200, kHtml, observe::render_runs_page(view_.status(), view_.ended_runs())};
  }
  if (path == "/api/runs") return {200, kJson, proto::encode_status_document(view_.status())};
  const std::string runs = "/runs/", api_runs = "/api/runs/";
  if (path.rfind(runs, 0) == 0 && path.size() > runs.size())
    return run_page(decoded(path.substr(runs.size())));
  if (path.rfind(api_runs, 0) == 0 && path.size() > api_runs.size())
    return run_json(decoded(path.substr(api_runs.size())));
  return not_found("no page at " + path + "; try /, /runs/<id>, /api/runs or /metrics");
}

observe::HttpResponse DaemonPages::run_page(const std::string& run_id) const {
  std::vector<nlohmann::json> events = view_.events(run_id);
  if (!known_run(view_.status(), events, run_id)) return not_found("no run " + run_id);
  observe::Timeline timeline = observe::build_timeline(run_id, events, view_.now_ms());
  return {200, kHtml, observe::render_run_page(timeline, events)};
}

observe::HttpResponse DaemonPages::run_json(const std::string& run_id) const {
  std::vector<nlohmann::json> events = view_.events(run_id);
  proto::StatusReply status = view_.status();
  if (!known_run(status, events, run_id)) return not_found("no run " + run_id);
  nlohmann::json out{{"run_id", run_id}, {"events", events}, {"status", nullptr}};
  for (const auto& run : status.runs) {
    if (run.run_id == run_id)
      out["status"] =
          nlohmann::json::parse(proto::encode_status_document({status.port, {run}}))["runs"][0];
  }
  return {200, kJson, out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

}  // namespace cohort
