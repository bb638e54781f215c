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

// What the daemon at `endpoint` says of run `run_id`.
enum class RunSeen {
  NoAnswer,  ///< nothing answers as a daemon
  NoRun,     ///< a daemon answers (maybe with a refusal, such as a wrong token), without the run
  Ended,     ///< the run, completed or failed
  Forming,   ///< the run, waiting for nodes
  InRound,   ///< the run, a round running
};

RunSeen see_run(const std::string& endpoint, const std::string& run_id, const std::string& token,
                int timeout_ms) {
  StatusFetch fetched = ask_status(endpoint, run_id, token, timeout_ms);
  if (!fetched.reply) return fetched.answered ? RunSeen::NoRun : RunSeen::NoAnswer;
  for (const proto::StatusRun& run : fetched.reply->runs) {
    if (run.run_id != run_id) continue;
    if (run.phase == "running") return RunSeen::InRound;
    return run.phase == "forming" ? RunSeen::Forming : RunSeen::Ended;
  }
  return RunSeen::NoRun;
}

bool live(RunSeen seen) { return seen == RunSeen::Forming || seen == RunSeen::InRound; }

// The daemon at `endpoint` has run `run_id` as `wanted` says.
bool has_run(const std::string& endpoint, const std::string& run_id, const std::string& token,
             RunWanted wanted, int timeout_ms) {
  if (run_id.empty()) {
    return wanted == RunWanted::Any && ask_status(endpoint, "", token, timeout_ms).reply;
  }
  RunSeen seen = see_run(endpoint, run_id, token, timeout_ms);
  return live(seen) || (wanted == RunWanted::Any && seen == RunSeen::Ended);
}

// `endpoint` then the endpoints of --rdzv-fallback `list`; nullopt, with `problem`, when the
// list is malformed.
std::optional<std::vector<std::string>> run_endpoints(const std::string& endpoint,
                                                      const std::string& list,
                                                      std::string& problem) {
  auto first = parse_host_port(endpoint, 29400);
  auto fallbacks = parse_fallback_list(list, first ? first->port : 29400, problem);
  if (!fallbacks) return std::nullopt;
  std::vector<std::string> endpoints{endpoint};
  for (const HostPort& fallback : *fallbacks)
    endpoints.push_back(host_port_text(fallback.host, fallback.port));
  return endpoints;
}

}  // namespace

std::optional<MovedRun> find_moved_run(const RendezvousSettings& settings,
                                       const std::string& run_id, int timeout_ms) {
  // The daemon at --rdzv-endpoint has the run: it has not moved. Asked again once a fallback has
  // it, since two names may reach one daemon that was only starting when first asked.
  std::string first = host_port_text(settings.host, settings.port);
  RunSeen at_first = see_run(first, run_id, settings.token, timeout_ms);
  if (live(at_first)) return std::nullopt;
  for (size_t i = 0; i < settings.fallbacks.size(); ++i) {
    const FallbackEndpoint& fallback = settings.fallbacks[i];
    RunSeen there =
        see_run(host_port_text(fallback.host, fallback.port), run_id, settings.token, timeout_ms);
    // In a round there, the run moved, even when the first daemon answers without it (its host
    // was cut off and followed the run, or it restarted); only forming there, the first daemon
    // must be gone (the run's nodes may still be on their way to it).
    if (there != RunSeen::InRound && (there != RunSeen::Forming || at_first != RunSeen::NoAnswer))
      continue;
    RunSeen again = see_run(first, run_id, settings.token, timeout_ms);
    if (live(again) || (there == RunSeen::Forming && again != RunSeen::NoAnswer))
      return std::nullopt;
    return MovedRun{i, again != RunSeen::NoAnswer};
  }
  return std::nullopt;
}

bool follow_the_run(const std::string& command, std::string& endpoint, const std::string& list,
                    const std::string& run_id, const std::string& token, RunWanted wanted) {
  if (list.empty()) return true;
  std::string problem;
  std::optional<std::vector<std::string>> candidates = run_endpoints(endpoint, list, problem);
  if (!candidates) {
    std::cerr << "cohort " << command << ": " << problem << "\n";
    return false;
  }
  for (const std::string& candidate : *candidates) {
    if (!has_run(candidate, run_id, token, wanted, kRunQueryMs)) continue;
    if (candidate == endpoint) return true;
    if (run_id.empty()) {
      std::cerr << "cohort " << command << ": --rdzv-endpoint " << endpoint
                << " does not answer; asking " << candidate << " (--rdzv-fallback)\n";
    } else {
      std::cerr << "cohort " << command << ": run '" << run_id << "' is at " << candidate
                << " (--rdzv-fallback), not at --rdzv-endpoint " << endpoint << "\n";
    }
    endpoint = candidate;
    return true;
  }
  return true;
}

std::string run_elsewhere(const std::string& current, const std::string& endpoint,
                          const std::string& list, const std::string& run_id,
                          const std::string& token) {
  if (list.empty()) return "";
  std::string problem;
  std::optional<std::vector<std::string>> candidates = run_endpoints(endpoint, list, problem);
  if (!candidates) return "";
  RunWanted wanted = run_id.empty() ? RunWanted::Any : RunWanted::Live;
  for (const std::string& candidate : *candidates) {
    if (candidate != current && has_run(candidate, run_id, token, wanted, kRunQueryMs))
      return candidate;
  }
  return "";
}

}  // namespace cohort
