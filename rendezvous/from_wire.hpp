// What the daemon takes from agents' messages, as the state machine's own types: a run's
// configuration from a hello, a worker's failure, a node's progress report and the outcome it
// carries over a daemon restart. Pure functions; any thread.
#pragma once

#include <optional>

#include "proto/control_messages.hpp"
#include "rendezvous/rendezvous_types.hpp"
#include "rendezvous/run_progress.hpp"

namespace cohort::rdzv {

RunConfig from_wire(const proto::WireRunConfig& wire);
FailureReport from_wire(const proto::WorkerFailed& failed);
ProgressReport from_wire(const proto::Progress& wire);
std::optional<CarriedOutcome> from_wire(const std::optional<proto::CarriedOutcome>& wire);

}  // namespace cohort::rdzv
