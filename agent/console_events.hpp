// --event-log-handler console: torchrun's console event handler, a line on stderr per event of
// the run (the agent starts, a rendezvous round completes, a worker fails, the group restarts,
// the run ends), as "cohort event: NAME key=value ...". Pure formatting; the Agent writes the
// lines (io thread).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "agent/worker_failure.hpp"
#include "proto/control_messages.hpp"

namespace cohort::events {

using Fields = std::vector<std::pair<std::string, std::string>>;

/// "cohort event: NAME k=v k2=v2\n"; values with spaces are quoted.
std::string line(const std::string& name, const Fields& fields);

std::string run_started(const std::string& run_id, const std::string& host, int nproc);
std::string round_complete(const std::string& run_id, const proto::RoundAssigned& round);
std::string worker_failed(const std::string& run_id, int round, const WorkerFailure& failure);
std::string restarting(const std::string& run_id, const std::string& reason);
std::string run_ended(const std::string& run_id, int exit_code);

}  // namespace cohort::events
