// The fields of the daemon's events (docs/EVENTS.md) that are built from what a node reported:
// worker.failed, hang.declared, hang.attributed and round.started, bounded so that one event
// line stays small whatever a node sends. Pure functions; any thread.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "proto/control_messages.hpp"
#include "rendezvous/dump_gathering.hpp"
#include "rendezvous/rendezvous_types.hpp"

namespace cohort::rdzv {

/// worker.failed: who failed, how, and the line of its failure summary that says something.
nlohmann::json worker_failed_fields(const std::string& node, const proto::WorkerFailed& failed);
/// hang.declared: the hung rank a node names, the one silent longest of those it reported.
nlohmann::json hang_fields(const std::string& node, const proto::Progress& progress);
/// hang.attributed: the collective where the ranks part ways (rank lists as ranges).
nlohmann::json hang_attributed_fields(int round, const HangVerdict& verdict);
/// round.started: the members, each with its host where the run knows it (`hosts` by node id).
nlohmann::json round_started_fields(const StartRound& start,
                                    const std::map<std::string, std::string>& hosts);
/// round.started's fields of the first round of a run this daemon took over (RunState's
/// resumed_after and moved_from, added to `fields`); nothing for any other round.
void add_resumed_fields(nlohmann::json& fields, int round, int resumed_after,
                        const std::string& moved_from);

}  // namespace cohort::rdzv
