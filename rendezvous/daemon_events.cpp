#include "rendezvous/daemon_events.hpp"

#include "observe/event_text.hpp"
#include "rendezvous/collective_attribution.hpp"

namespace cohort::rdzv {
namespace {

// The line of a failure summary that says something (not its "=====" banner), cut to a size an
// event line can carry.
std::string summary_line(const std::string& text) {
  constexpr size_t kMaxSummaryBytes = 512;
  std::string line = observe::meaningful_line(text);
  if (line.size() > kMaxSummaryBytes) line = line.substr(0, kMaxSummaryBytes) + "...";
  return line;
}

}  // namespace

nlohmann::json worker_failed_fields(const std::string& node, const proto::WorkerFailed& failed) {
  return {
      {"node", node},
      {"round", failed.round},
      {"rank", failed.rank},
      {"local_rank", failed.local_rank},
      {"status", failed.description.empty() ? "exit status " + std::to_string(failed.exit_status)
                                            : failed.description},
      {"summary", summary_line(failed.summary)},
      {"host", failed.host}};
}

nlohmann::json hang_fields(const std::string& node, const proto::Progress& progress) {
  nlohmann::json fields{{"node", node}, {"host", progress.host}, {"round", progress.round}};
  const proto::RankProgress* silent = nullptr;
  for (const proto::RankProgress& rank : progress.ranks) {
    if (silent == nullptr || rank.silent_ms > silent->silent_ms) silent = &rank;
  }
  if (silent != nullptr) {
    fields["local_rank"] = silent->local_rank;
    fields["silent_ms"] = silent->silent_ms;
    if (silent->step) fields["step"] = *silent->step;
  }
  return fields;
}

nlohmann::json hang_attributed_fields(int round, const HangVerdict& verdict) {
  nlohmann::json fields{{"round", round}, {"text", verdict.text}};
  const CollectiveAttribution& attribution = verdict.attribution;
  fields["without_dump"] = rank_ranges_text(attribution.without_dump);
  if (!attribution.primary) {
    fields["classification"] = verdict.had_dumps ? "none" : "no_dumps";
    return fields;
  }
  const GroupAttribution& group = attribution.groups[*attribution.primary];
  fields["classification"] = divergence_name(group.divergence);
  fields["pg"] = group.pg;
  fields["pg_desc"] = group.pg_desc;
  fields["collective_seq"] = group.seq;  // "seq" is the line's own
  fields["op"] = group.op;
  fields["ranks"] = group.ranks;
  fields["culprit_ranks"] = rank_ranges_text(group.culprits);
  fields["waiting_ranks"] = rank_ranges_text(group.waiting);
  nlohmann::json hosts = nlohmann::json::array();
  for (size_t i = 0; i < group.culprit_hosts.size() && i < 16; ++i) {
    hosts.push_back(group.culprit_hosts[i]);
  }
  fields["culprit_hosts"] = hosts;
  return fields;
}

nlohmann::json round_started_fields(const StartRound& start,
                                    const std::map<std::string, std::string>& hosts) {
  nlohmann::json members = nlohmann::json::array();
  for (const Assignment& member : start.members) {
    nlohmann::json fields{{"node", member.node_id},
                          {"address", member.address},
                          {"group_rank", member.group_rank},
                          {"local_world_size", member.local_world_size}};
    auto host = hosts.find(member.node_id);
    if (host != hosts.end()) fields["host"] = host->second;
    members.push_back(std::move(fields));
  }
  return {{"round", start.round},
          {"world_size", start.members.front().world_size},
          {"members", std::move(members)}};
}

void add_resumed_fields(nlohmann::json& fields, int round, int resumed_after,
                        const std::string& moved_from) {
  if (resumed_after < 0 || round != resumed_after + 1) return;  // not its first round here
  fields["resumed_after"] = resumed_after;
  if (!moved_from.empty()) fields["moved_from"] = moved_from;
}

}  // namespace cohort::rdzv
