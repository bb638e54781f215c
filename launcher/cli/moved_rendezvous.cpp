#include "launcher/cli/moved_rendezvous.hpp"

#include <iostream>

#include "common/host_port.hpp"
#include "common/text.hpp"
#include "launcher/cli/status_command.hpp"
#include "launcher/options/fallback_list.hpp"

namespace cohort {

namespace {

/// How long `cohort status` and `cohort stop` give each endpoint to say whether it has the run
/// (a host that is gone answers nothing).
constexpr int kRunQueryMs = 2000;

StatusFetch ask_status(const std::string& endpoint, const std::string& run_id,
                       const std::string& token, int timeout_ms) {
  StatusQuery query;
  query.endpoint = endpoint;
  query.run_id = run_id;
  query.token = token;
  query.timeout_ms = timeout_ms;
  return fetch_status(query);  // a refused connection answers at once
}

// The daemon at `endpoint` has run `run_id` as `wanted` says.
bool has_run(const std::string& endpoint, const std::string& run_id, const std::string& token,
             RunWanted wanted, int timeout_ms) {
  StatusFetch fetched = ask_status(endpoint, run_id, token, timeout_ms);
  if (!fetched.reply) return false;
  if (run_id.empty()) return wanted == RunWanted::Any;
  for (const proto::StatusRun& run : fetched.reply->runs) {
    bool live = run.phase == "forming" || run.phase == "running";
    if (run.run_id == run_id && (live || wanted == RunWanted::Any)) return true;
  }
  return false;
}

// Anything answers as a daemon at `endpoint` (a status, or a refusal such as a wrong token).
bool daemon_answers(const std::string& endpoint, const std::string& token, int timeout_ms) {
  return ask_status(endpoint, "", token, timeout_ms).answered;
}

}  // namespace

std::optional<size_t> find_moved_run(const RendezvousSettings& settings, const std::string& run_id,
                                     int timeout_ms) {
  // A daemon that answers at --rdzv-endpoint holds the run (or will): it has not moved. Asked
  // again after a fallback has the run, since two names may reach one daemon that was only
  // starting when first asked.
  std::string first = host_port_text(settings.host, settings.port);
  if (daemon_answers(first, settings.token, timeout_ms)) return std::nullopt;
  for (size_t i = 0; i < settings.fallbacks.size(); ++i) {
    const FallbackEndpoint& fallback = settings.fallbacks[i];
    if (has_run(host_port_text(fallback.host, fallback.port), run_id, settings.token,
                RunWanted::Live, timeout_ms)) {
      if (daemon_answers(first, settings.token, timeout_ms)) return std::nullopt;
      return i;
    }
  }
  return std::nullopt;
}

bool follow_the_run(const std::string& command, std::string& endpoint, const std::string& list,
                    const std::string& run_id, const std::string& token, RunWanted wanted) {
  if (list.empty()) return true;
  std::string problem;
  auto first = parse_host_port(endpoint, 29400);
  auto fallbacks = parse_fallback_list(list, first ? first->port : 29400, problem);
  if (!fallbacks) {
    std::cerr << "cohort " << command << ": " << problem << "\n";
    return false;
  }
  if (has_run(endpoint, run_id, token, wanted, kRunQueryMs)) return true;
  for (const HostPort& moved : *fallbacks) {
    std::string fallback = host_port_text(moved.host, moved.port);
    if (!has_run(fallback, run_id, token, wanted, kRunQueryMs)) continue;
    if (run_id.empty()) {
      std::cerr << "cohort " << command << ": --rdzv-endpoint " << endpoint
                << " does not answer; asking " << fallback << " (--rdzv-fallback)\n";
    } else {
      std::cerr << "cohort " << command << ": run '" << run_id << "' is at " << fallback
                << " (--rdzv-fallback), not at --rdzv-endpoint " << endpoint << "\n";
    }
    endpoint = fallback;
    return true;
  }
  return true;
}

}  // namespace cohort
