#include "agent/agent_events.hpp"

namespace cohort::agent_events {
namespace {

Event make(const Source& source, const char* name, nlohmann::json fields) {
  fields["node"] = source.node;
  fields["host"] = source.host;
  return {source.run_id, name, std::move(fields)};
}

}  // namespace

Event agent_started(const Source& source, int nproc, const std::string& endpoint) {
  return make(source, "agent.started", {{"nproc_per_node", nproc}, {"endpoint", endpoint}});
}

Event workers_started(const Source& source, const proto::RoundAssigned& round, int nproc) {
  nlohmann::json ranks = nlohmann::json::array();
  for (int local = 0; local < nproc; ++local) ranks.push_back(round.base_rank + local);
  return make(source, "workers.started",
              {{"round", round.round},
               {"group_rank", round.group_rank},
               {"ranks", std::move(ranks)},
               {"world_size", round.world_size},
               {"restarts_used", round.restarts_used},
               {"master", round.master_addr + ":" + std::to_string(round.master_port)}});
}

Event worker_failed(const Source& source, int round, const WorkerFailure& failure) {
  nlohmann::json fields{{"round", round},
                        {"rank", failure.rank},
                        {"local_rank", failure.local_rank},
                        {"pid", failure.pid},
                        {"status", failure.status.describe()},
                        {"uptime_ms", failure.uptime.count()}};
  if (!failure.error_message.empty()) fields["error"] = failure.error_message;
  if (failure.hang) {
    fields["hang"] = true;
    fields["silent_ms"] = failure.hang->silent_for.count();
    if (failure.hang->step) fields["step"] = *failure.hang->step;
  }
  if (!failure.timer_expired.empty()) fields["timer_expired"] = failure.timer_expired;
  return make(source, "worker.failed", std::move(fields));
}

Event workers_stopped(const Source& source, int round, const std::string& reason) {
  return make(source, "workers.stopped", {{"round", round}, {"reason", reason}});
}

Event agent_finished(const Source& source, int exit_code) {
  return make(source, "agent.finished", {{"exit_code", exit_code}});
}

Event rendezvous_moved(const Source& source, const std::string& kind, const std::string& from,
                       const std::string& to, const std::string& reason) {
  return make(source, "rendezvous.moved",
              {{"kind", kind}, {"from", from}, {"to", to}, {"reason", reason}});
}

}  // namespace cohort::agent_events
