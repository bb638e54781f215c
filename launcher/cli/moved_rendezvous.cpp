#include "launcher/cli/moved_rendezvous.hpp"

#include "launcher/cli/status_command.hpp"

namespace cohort {

std::string endpoint_text(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::optional<size_t> find_moved_run(const std::vector<FallbackEndpoint>& fallbacks,
                                     const std::string& run_id, const std::string& token,
                                     int timeout_ms) {
  for (size_t i = 0; i < fallbacks.size(); ++i) {
    StatusQuery query;
    query.endpoint = endpoint_text(fallbacks[i].host, fallbacks[i].port);
    query.run_id = run_id;
    query.token = token;
    query.timeout_ms = timeout_ms;
    StatusFetch fetched = fetch_status(query);  // a refused connection answers at once
    if (!fetched.reply) continue;
    for (const proto::StatusRun& run : fetched.reply->runs) {
      if (run.run_id == run_id && (run.phase == "forming" || run.phase == "running")) return i;
    }
  }
  return std::nullopt;
}

}  // namespace cohort
