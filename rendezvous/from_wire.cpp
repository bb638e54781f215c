#include "rendezvous/from_wire.hpp"

namespace cohort::rdzv {

RunConfig from_wire(const proto::WireRunConfig& wire) {
  return {wire.min_nodes,
          wire.max_nodes,
          wire.max_restarts,
          Ms(wire.last_call_ms),
          Ms(wire.join_timeout_ms),
          Ms(wire.heartbeat_timeout_ms),
          wire.host_failure_limit,
          Ms(wire.host_cooldown_ms),
          wire.fallbacks};
}

FailureReport from_wire(const proto::WorkerFailed& failed) {
  return {failed.round, failed.rank,    failed.local_rank,   failed.exit_status, failed.description,
          failed.host,  failed.summary, failed.final_reason, failed.cause};
}

ProgressReport from_wire(const proto::Progress& wire) {
  ProgressReport report{wire.round, wire.hang, Ms(wire.hang_timeout_ms), wire.straggler_factor_pct,
                        wire.host,  {}};
  for (const proto::RankProgress& rank : wire.ranks) {
    std::optional<Ms> step_time;
    if (rank.step_ms) step_time = Ms(*rank.step_ms);
    report.ranks.push_back({rank.local_rank, Ms(rank.silent_ms), rank.step, step_time});
  }
  return report;
}

std::optional<CarriedOutcome> from_wire(const std::optional<proto::CarriedOutcome>& wire) {
  if (!wire) return std::nullopt;
  CarriedOutcome outcome{wire->round, std::nullopt};
  if (wire->failure) outcome.failure = from_wire(*wire->failure);
  return outcome;
}

}  // namespace cohort::rdzv
