// What the daemon's HTTP port answers: /metrics (Prometheus text), / (the runs), /runs/<id> (a
// run's timeline), /api/runs (the status document, as `cohort status --json` prints it) and
// /api/runs/<id> (the run's status and events). It reads the daemon through the accessors it is
// given and holds no state of its own. Owned by the daemon; io thread.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "observe/http_response.hpp"
#include "proto/control_messages.hpp"
#include "rendezvous/daemon_metrics.hpp"

namespace cohort {

struct DaemonView {
  std::function<proto::StatusReply()> status;
  std::function<MetricsSnapshot()> snapshot;
  /// The events the daemon holds for a run, oldest first; empty for an unknown run.
  std::function<std::vector<nlohmann::json>(const std::string& run_id)> events;
  std::function<int64_t()> now_ms;  ///< wall-clock milliseconds since the epoch
  /// Runs that ended whose history the daemon still holds, the last to end first.
  std::function<std::vector<std::string>()> ended_runs = [] { return std::vector<std::string>{}; };
};

class DaemonPages {
 public:
  DaemonPages(DaemonView view, const DaemonMetrics& metrics)
      : view_(std::move(view)), metrics_(metrics) {}

  /// The answer to a GET of `target` (path with an optional query, which is ignored).
  observe::HttpResponse answer(const std::string& target) const;

 private:
  observe::HttpResponse run_page(const std::string& run_id) const;
  observe::HttpResponse run_json(const std::string& run_id) const;

  DaemonView view_;
  const DaemonMetrics& metrics_;
};

}  // namespace cohort
