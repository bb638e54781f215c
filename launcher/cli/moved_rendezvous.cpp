#include "launcher/cli/moved_rendezvous.hpp"

#include "launcher/cli/status_command.hpp"

namespace cohort {

std::string endpoint_text(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

namespace {

// The daemon at `endpoint` has run `run_id`, forming or running. A refused connection answers
// at once.
bool has_live_run(const std::string& endpoint, const std::string& run_id, const std::string& token,
                  int timeout_ms) {
  StatusQuery query;
  query.endpoint = endpoint;
  query.run_id = run_id;
  query.token = token;
  query.timeout_ms = timeout_ms;
  StatusFetch fetched = fetch_status(query);
  if (!fetched.reply) return false;
  for (const proto::StatusRun& run : fetched.reply->runs) {
    if (run.run_id == run_id && (run.phase == "forming" || run.phase == "running")) return true;
  }
  return false;
}

}  // namespace

std::optional<size_t> find_moved_run(const RendezvousSettings& settings, const std::string& run_id,
                                     int timeout_ms) {
  // Where --rdzv-endpoint still has it, it has not moved (a fallback that names the same
  // daemon under another name would say it had).
  if (has_live_run(endpoint_text(settings.host, settings.port), run_id, settings.token,
                   timeout_ms)) {
    return std::nullopt;
  }
  for (size_t i = 0; i < settings.fallbacks.size(); ++i) {
    const FallbackEndpoint& fallback = settings.fallbacks[i];
    if (has_live_run(endpoint_text(fallback.host, fallback.port), run_id, settings.token,
                     timeout_ms)) {
      return i;
    }
  }
  return std::nullopt;
}

}  // namespace cohort
