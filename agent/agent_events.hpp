// The agent's events (docs/EVENTS.md, "Agent events"): what the agent saw happen to its run, as
// Event values for the EventLog the Agent owns (--event-log FILE, --event-log-handler console).
// Pure: builds the events; the Agent writes them (io thread).
#pragma once

#include <string>

#include "agent/worker_failure.hpp"
#include "common/event_log.hpp"
#include "proto/control_messages.hpp"

namespace cohort::agent_events {

/// Who writes: the fields every agent event carries (`node` and `host`).
struct Source {
  std::string run_id;
  std::string node;
  std::string host;
};

Event agent_started(const Source& source, int nproc, const std::string& endpoint);
Event workers_started(const Source& source, const proto::RoundAssigned& round, int nproc);
Event worker_failed(const Source& source, int round, const WorkerFailure& failure);
Event workers_stopped(const Source& source, int round, const std::string& reason);
Event agent_finished(const Source& source, int exit_code);
/// The agent's rendezvous moved (--rdzv-fallback): `kind` "fallback" (the daemon at `from` is
/// gone), "back" (the run is still at `to`, which it had left) or "follow" (the run went on at
/// `to` without this node).
Event rendezvous_moved(const Source& source, const std::string& kind, const std::string& from,
                       const std::string& to, const std::string& reason);

}  // namespace cohort::agent_events
