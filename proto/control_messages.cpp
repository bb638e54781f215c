#include "proto/control_messages.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/utf8.hpp"
#include "proto/auth.hpp"
#include "proto/untrusted_json.hpp"
#include "proto/wire_text.hpp"

namespace cohort::proto {

using json = nlohmann::json;

// to_json / from_json live in the messages' namespace so that nlohmann finds them.

// WireRunConfig: every field required, but fallbacks (absent from older agents) optional.
void to_json(json& out, const WireRunConfig& m) {
  out = json{{"min_nodes", m.min_nodes},
             {"max_nodes", m.max_nodes},
             {"max_restarts", m.max_restarts},
             {"last_call_ms", m.last_call_ms},
             {"join_timeout_ms", m.join_timeout_ms},
             {"heartbeat_timeout_ms", m.heartbeat_timeout_ms},
             {"host_failure_limit", m.host_failure_limit},
             {"host_cooldown_ms", m.host_cooldown_ms}};
  if (!m.fallbacks.empty()) out["fallbacks"] = m.fallbacks;
}
void from_json(const json& in, WireRunConfig& m) {
  in.at("min_nodes").get_to(m.min_nodes);
  in.at("max_nodes").get_to(m.max_nodes);
  in.at("max_restarts").get_to(m.max_restarts);
  in.at("last_call_ms").get_to(m.last_call_ms);
  in.at("join_timeout_ms").get_to(m.join_timeout_ms);
  in.at("heartbeat_timeout_ms").get_to(m.heartbeat_timeout_ms);
  in.at("host_failure_limit").get_to(m.host_failure_limit);
  in.at("host_cooldown_ms").get_to(m.host_cooldown_ms);
  if (in.contains("fallbacks")) in.at("fallbacks").get_to(m.fallbacks);
}
// WorkerFailed: every field required, but final_reason and cause (absent from older agents)
// optional.
void to_json(json& out, const WorkerFailed& m) {
  out = json{{"round", m.round},
             {"rank", m.rank},
             {"local_rank", m.local_rank},
             {"exit_status", m.exit_status},
             {"description", m.description},
             {"host", m.host},
             {"summary", m.summary}};
  if (!m.final_reason.empty()) out["final_reason"] = m.final_reason;
  if (!m.cause.empty()) out["cause"] = m.cause;
}
void from_json(const json& in, WorkerFailed& m) {
  in.at("round").get_to(m.round);
  in.at("rank").get_to(m.rank);
  in.at("local_rank").get_to(m.local_rank);
  in.at("exit_status").get_to(m.exit_status);
  in.at("description").get_to(m.description);
  in.at("host").get_to(m.host);
  in.at("summary").get_to(m.summary);
  if (in.contains("final_reason")) in.at("final_reason").get_to(m.final_reason);
  if (in.contains("cause")) in.at("cause").get_to(m.cause);
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NodeSucceeded, round)
void to_json(json& out, const Leave& m) {
  out = json{{"reason", m.reason}};
  if (!m.moved_to.empty()) out["moved_to"] = m.moved_to;
}
void from_json(const json& in, Leave& m) {
  in.at("reason").get_to(m.reason);
  m.moved_to = in.value("moved_to", std::string());
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Welcome, version, proof, agent_hosted)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Challenge, nonce)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(StatusRequest, run_id, proof, client_nonce, brief,
                                                own_node_prefix)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(EventsRequest, run_id, proof, client_nonce)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(StopRunRequest, run_id, reason, proof, by,
                                                client_nonce)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Unhealthy, reason)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Notice, text)
// RoundAssigned: host_member optional (older daemons did not send it).
void to_json(json& out, const RoundAssigned& m) {
  out = json{{"round", m.round},
             {"group_rank", m.group_rank},
             {"group_world_size", m.group_world_size},
             {"base_rank", m.base_rank},
             {"world_size", m.world_size},
             {"master_addr", m.master_addr},
             {"master_port", m.master_port},
             {"restarts_used", m.restarts_used},
             {"max_restarts", m.max_restarts}};
  if (m.host_member) out["host_member"] = true;
}
void from_json(const json& in, RoundAssigned& m) {
  in.at("round").get_to(m.round);
  in.at("group_rank").get_to(m.group_rank);
  in.at("group_world_size").get_to(m.group_world_size);
  in.at("base_rank").get_to(m.base_rank);
  in.at("world_size").get_to(m.world_size);
  in.at("master_addr").get_to(m.master_addr);
  in.at("master_port").get_to(m.master_port);
  in.at("restarts_used").get_to(m.restarts_used);
  in.at("max_restarts").get_to(m.max_restarts);
  m.host_member = in.value("host_member", false);
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Restart, reason)
// Stop: stopped_by optional (older daemons did not send it).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Stop, exit_status, reason, summary, stopped_by)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Error, message, rejoin)
// StatusNode: heartbeat_age_ms optional (older daemons did not send it).
void to_json(json& out, const StatusNode& m) {
  out = json{{"node_id", m.node_id},
             {"address", m.address},
             {"state", m.state},
             {"group_rank", m.group_rank},
             {"local_world_size", m.local_world_size},
             {"succeeded", m.succeeded},
             {"heartbeat_age_ms", m.heartbeat_age_ms}};
  if (!m.reason.empty()) out["reason"] = m.reason;
}
void from_json(const json& in, StatusNode& m) {
  in.at("node_id").get_to(m.node_id);
  in.at("address").get_to(m.address);
  in.at("state").get_to(m.state);
  in.at("group_rank").get_to(m.group_rank);
  in.at("local_world_size").get_to(m.local_world_size);
  in.at("succeeded").get_to(m.succeeded);
  if (in.contains("heartbeat_age_ms")) in.at("heartbeat_age_ms").get_to(m.heartbeat_age_ms);
  m.reason = in.value("reason", std::string());
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StatusRank, rank, node, step_ms)
// StatusRun: every field required but median_step_ms, slowest and last_failure (older daemons
// had none of them).
void to_json(json& out, const StatusRun& m) {
  out = json{{"run_id", m.run_id},
             {"phase", m.phase},
             {"round", m.round},
             {"restarts_used", m.restarts_used},
             {"max_restarts", m.max_restarts},
             {"min_nodes", m.min_nodes},
             {"max_nodes", m.max_nodes},
             {"store_port", m.store_port},
             {"nodes", m.nodes},
             {"median_step_ms", m.median_step_ms},
             {"slowest", m.slowest},
             {"last_failure", m.last_failure}};
  if (m.more_nodes > 0) out["more_nodes"] = m.more_nodes;
  if (m.live_nodes >= 0) out["live_nodes"] = m.live_nodes;
  if (m.resumed_after >= 0) out["resumed_after"] = m.resumed_after;
  if (!m.moved_from.empty()) out["moved_from"] = m.moved_from;
}
void from_json(const json& in, StatusRun& m) {
  in.at("run_id").get_to(m.run_id);
  in.at("phase").get_to(m.phase);
  in.at("round").get_to(m.round);
  in.at("restarts_used").get_to(m.restarts_used);
  in.at("max_restarts").get_to(m.max_restarts);
  in.at("min_nodes").get_to(m.min_nodes);
  in.at("max_nodes").get_to(m.max_nodes);
  in.at("store_port").get_to(m.store_port);
  in.at("nodes").get_to(m.nodes);
  if (in.contains("median_step_ms")) in.at("median_step_ms").get_to(m.median_step_ms);
  if (in.contains("slowest")) in.at("slowest").get_to(m.slowest);
  if (in.contains("last_failure")) in.at("last_failure").get_to(m.last_failure);
  if (in.contains("more_nodes")) in.at("more_nodes").get_to(m.more_nodes);
  if (in.contains("live_nodes")) in.at("live_nodes").get_to(m.live_nodes);
  if (in.contains("resumed_after")) in.at("resumed_after").get_to(m.resumed_after);
  if (in.contains("moved_from")) in.at("moved_from").get_to(m.moved_from);
}

// An answer's proof is left out when empty (no token), so that /api/runs and `cohort status
// --json` show what they always did, and an answer without one still decodes.
void put_proof(json& out, const std::string& proof) {
  if (!proof.empty()) out["proof"] = proof;
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MovedRun, run_id, to)
void to_json(json& out, const StatusReply& m) {
  out = json{{"port", m.port}, {"runs", m.runs}};
  if (!m.moved_runs.empty()) out["moved_runs"] = m.moved_runs;
  put_proof(out, m.proof);
}
void from_json(const json& in, StatusReply& m) {
  in.at("port").get_to(m.port);
  in.at("runs").get_to(m.runs);
  if (in.contains("moved_runs")) in.at("moved_runs").get_to(m.moved_runs);
  m.proof = in.value("proof", std::string());
}
void to_json(json& out, const EventsReply& m) {
  out = json{{"run_id", m.run_id}, {"events", m.events}, {"dropped", m.dropped}};
  put_proof(out, m.proof);
}
void from_json(const json& in, EventsReply& m) {
  in.at("run_id").get_to(m.run_id);
  in.at("events").get_to(m.events);
  in.at("dropped").get_to(m.dropped);
  m.proof = in.value("proof", std::string());
}
void to_json(json& out, const StopRunReply& m) {
  out = json{{"run_id", m.run_id}, {"stopped", m.stopped}, {"nodes", m.nodes}};
  put_proof(out, m.proof);
}
void from_json(const json& in, StopRunReply& m) {
  in.at("run_id").get_to(m.run_id);
  in.at("stopped").get_to(m.stopped);
  in.at("nodes").get_to(m.nodes);
  m.proof = in.value("proof", std::string());
}

// Empty messages have no fields.
template <typename T>
void to_json_empty(json& out, const T&) {
  out = json::object();
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Join, rank0_port)
void to_json(json& out, const Heartbeat& m) { to_json_empty(out, m); }
void from_json(const json&, Heartbeat&) {}
void to_json(json& out, const Complete& m) { to_json_empty(out, m); }
void from_json(const json&, Complete&) {}
void to_json(json& out, const HeartbeatAck& m) { to_json_empty(out, m); }
void from_json(const json&, HeartbeatAck&) {}

// Messages with optional fields: absent in JSON when unset.
void to_json(json& out, const CarriedOutcome& m) {
  out = json{{"round", m.round}};
  if (m.failure) out["failure"] = *m.failure;
}
void from_json(const json& in, CarriedOutcome& m) {
  in.at("round").get_to(m.round);
  if (in.contains("failure")) m.failure = in.at("failure").get<WorkerFailed>();
}
void to_json(json& out, const Hello& m) {
  out = json{{"magic", m.magic},
             {"version", m.version},
             {"run_id", m.run_id},
             {"node_id", m.node_id},
             {"address", m.address},
             {"local_world_size", m.local_world_size},
             {"last_round", m.last_round},
             {"last_round_nodes", m.last_round_nodes},
             {"restarts_used", m.restarts_used},
             {"config", m.config},
             {"rank0_port", m.rank0_port},
             {"client_nonce", m.client_nonce},
             {"proof", m.proof}};
  if (m.rank_hint) out["rank_hint"] = *m.rank_hint;
  if (m.outcome) out["outcome"] = *m.outcome;
  if (!m.unhealthy.empty()) out["unhealthy"] = m.unhealthy;
  if (m.age_ms >= 0) out["age_ms"] = m.age_ms;
  if (m.hosts_rendezvous) out["hosts_rendezvous"] = true;
  if (m.last_round_host_lost) out["last_round_host_lost"] = true;
  if (!m.last_round_at.empty()) out["last_round_at"] = m.last_round_at;
}
void from_json(const json& in, Hello& m) {
  in.at("magic").get_to(m.magic);
  in.at("version").get_to(m.version);
  in.at("run_id").get_to(m.run_id);
  in.at("node_id").get_to(m.node_id);
  in.at("address").get_to(m.address);
  in.at("local_world_size").get_to(m.local_world_size);
  in.at("last_round").get_to(m.last_round);
  m.last_round_nodes = in.value("last_round_nodes", 0);
  in.at("restarts_used").get_to(m.restarts_used);
  in.at("config").get_to(m.config);
  m.rank0_port = in.value("rank0_port", 0);
  m.client_nonce = in.value("client_nonce", std::string());
  m.proof = in.value("proof", std::string());
  if (in.contains("rank_hint")) m.rank_hint = in.at("rank_hint").get<int>();
  if (in.contains("outcome")) m.outcome = in.at("outcome").get<CarriedOutcome>();
  m.unhealthy = in.value("unhealthy", std::string());
  m.age_ms = in.value("age_ms", int64_t{-1});
  m.hosts_rendezvous = in.value("hosts_rendezvous", false);
  m.last_round_host_lost = in.value("last_round_host_lost", false);
  m.last_round_at = in.value("last_round_at", std::string());
}
void to_json(json& out, const Waiting& m) {
  out = json{{"joined", m.joined}, {"min_nodes", m.min_nodes}, {"max_nodes", m.max_nodes}};
  if (m.last_call_in_ms) out["last_call_in_ms"] = *m.last_call_in_ms;
}
void from_json(const json& in, Waiting& m) {
  in.at("joined").get_to(m.joined);
  in.at("min_nodes").get_to(m.min_nodes);
  in.at("max_nodes").get_to(m.max_nodes);
  if (in.contains("last_call_in_ms")) m.last_call_in_ms = in.at("last_call_in_ms").get<int64_t>();
}

// ---- Progress (hang root cause across nodes, stragglers) ----
void to_json(json& out, const RankProgress& m) {
  out = json{{"local_rank", m.local_rank}, {"silent_ms", m.silent_ms}};
  if (m.step) out["step"] = *m.step;
  if (m.step_ms) out["step_ms"] = *m.step_ms;
}
void from_json(const json& in, RankProgress& m) {
  in.at("local_rank").get_to(m.local_rank);
  in.at("silent_ms").get_to(m.silent_ms);
  if (in.contains("step")) m.step = in.at("step").get<int>();
  if (in.contains("step_ms")) m.step_ms = in.at("step_ms").get<int64_t>();
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Progress, round, hang, hang_timeout_ms, straggler_factor_pct,
                                   host, ranks)

namespace {
// The bounds of a round assignment: ranks inside their sizes, sizes that a daemon can make, a
// master address that is one word of printable characters (it becomes MASTER_ADDR). The agent
// checks its own ranks against the world size besides (it knows its local world size).
std::string round_out_of_range(const RoundAssigned& round) {
  auto in_range = [](int64_t value, int64_t low, int64_t high) {
    return value >= low && value <= high;
  };
  if (!in_range(round.round, 0, kMaxRound)) return "round";
  if (!in_range(round.group_world_size, 1, kMaxNodes)) return "group_world_size";
  if (!in_range(round.group_rank, 0, round.group_world_size - 1)) return "group_rank";
  if (!in_range(round.world_size, 1, int64_t{kMaxNodes} * kMaxLocalWorldSize)) return "world_size";
  if (!in_range(round.base_rank, 0, round.world_size - 1)) return "base_rank";
  if (!in_range(round.master_port, 0, 65535)) return "master_port";
  if (!in_range(round.restarts_used, 0, kMaxRound)) return "restarts_used";
  if (round.max_restarts < 0) return "max_restarts";
  if (round.master_addr.size() > kMaxMasterAddrBytes) return "master_addr";
  for (char c : round.master_addr) {
    if (c <= ' ' || c >= 0x7f) return "master_addr";
  }
  return {};
}

// The bounds of a progress report (control_messages.hpp); empty when it keeps them.
std::string progress_out_of_range(const Progress& progress) {
  auto in_range = [](int64_t value, int64_t low, int64_t high) {
    return value >= low && value <= high;
  };
  if (!in_range(progress.round, 0, kMaxRound)) return "round";
  if (!in_range(progress.hang_timeout_ms, 0, kMaxDurationMs)) return "hang_timeout_ms";
  if (!in_range(progress.straggler_factor_pct, kMinStragglerFactorPercent,
                kMaxStragglerFactorPercent)) {
    return "straggler_factor_pct";
  }
  if (progress.host.size() > kMaxProgressHostBytes) return "host";
  if (progress.ranks.size() > static_cast<size_t>(kMaxLocalWorldSize)) return "ranks";
  for (const RankProgress& rank : progress.ranks) {
    if (!in_range(rank.local_rank, 0, kMaxLocalWorldSize - 1)) return "ranks.local_rank";
    if (!in_range(rank.silent_ms, 0, kMaxDurationMs)) return "ranks.silent_ms";
    if (rank.step && *rank.step < 0) return "ranks.step";
    if (rank.step_ms && !in_range(*rank.step_ms, 0, kMaxDurationMs)) return "ranks.step_ms";
  }
  return {};
}
}  // namespace
// ---- end of progress ----

// ---- Collectives (the flight recorder read across every rank) ----
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HangDeclared, round, dump_timeout_ms)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DumpRequest, round)

void to_json(json& out, const CollectiveCall& m) {
  out = json{{"seq", m.seq},
             {"op", m.op},
             {"input_sizes", m.input_sizes},
             {"input_dtypes", m.input_dtypes},
             {"state", m.state}};
}
void from_json(const json& in, CollectiveCall& m) {
  in.at("seq").get_to(m.seq);
  in.at("op").get_to(m.op);
  in.at("input_sizes").get_to(m.input_sizes);
  in.at("input_dtypes").get_to(m.input_dtypes);
  in.at("state").get_to(m.state);
}
void to_json(json& out, const GroupProgress& m) {
  out = json{{"id", m.id}, {"desc", m.desc}};
  if (m.size) out["size"] = *m.size;
  if (m.last_enqueued) out["last_enqueued"] = *m.last_enqueued;
  if (m.last_started) out["last_started"] = *m.last_started;
  if (m.last_completed) out["last_completed"] = *m.last_completed;
  if (m.first_incomplete) out["first_incomplete"] = *m.first_incomplete;
  if (m.last_call) out["last_call"] = *m.last_call;
}
void from_json(const json& in, GroupProgress& m) {
  in.at("id").get_to(m.id);
  in.at("desc").get_to(m.desc);
  auto optional_int = [&](const char* key, std::optional<int64_t>& field) {
    if (in.contains(key)) field = in.at(key).get<int64_t>();
  };
  optional_int("size", m.size);
  optional_int("last_enqueued", m.last_enqueued);
  optional_int("last_started", m.last_started);
  optional_int("last_completed", m.last_completed);
  if (in.contains("first_incomplete")) m.first_incomplete = in.at("first_incomplete");
  if (in.contains("last_call")) m.last_call = in.at("last_call");
}
void to_json(json& out, const RankCollectivesReport& m) {
  out = json{{"rank", m.rank}, {"groups", m.collectives.groups}};
  if (!m.error.empty()) out["error"] = m.error;
  if (!m.collectives.version.empty()) out["version"] = m.collectives.version;
}
void from_json(const json& in, RankCollectivesReport& m) {
  in.at("rank").get_to(m.rank);
  in.at("groups").get_to(m.collectives.groups);
  if (in.contains("error")) in.at("error").get_to(m.error);
  if (in.contains("version")) in.at("version").get_to(m.collectives.version);
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Collectives, round, host, ranks)

namespace {
bool call_fits(const CollectiveCall& call) {
  if (call.op.size() > kMaxCollectiveText || call.state.size() > kMaxCollectiveText) return false;
  if (call.input_sizes.size() > kMaxCollectiveItems) return false;
  if (call.input_dtypes.size() > kMaxCollectiveItems) return false;
  for (const auto& sizes : call.input_sizes) {
    if (sizes.size() > kMaxCollectiveItems) return false;
  }
  for (const auto& dtype : call.input_dtypes) {
    if (dtype.size() > kMaxCollectiveText) return false;
  }
  return true;
}

// The bounds of a collectives report; empty when it keeps them.
std::string collectives_out_of_range(const Collectives& report) {
  if (report.round < 0 || report.round > kMaxRound) return "round";
  if (report.host.size() > kMaxProgressHostBytes) return "host";
  if (report.ranks.size() > static_cast<size_t>(kMaxLocalWorldSize)) return "ranks";
  for (const RankCollectivesReport& rank : report.ranks) {
    if (rank.rank < 0) return "ranks.rank";
    if (rank.error.size() > kMaxCollectiveText * 4) return "ranks.error";
    if (rank.collectives.version.size() > kMaxCollectiveText) return "ranks.version";
    if (rank.collectives.groups.size() > kMaxSentProcessGroups) return "ranks.groups";
    for (const GroupProgress& group : rank.collectives.groups) {
      if (group.id.size() > kMaxCollectiveText || group.desc.size() > kMaxCollectiveText) {
        return "ranks.groups.id";
      }
      if (group.first_incomplete && !call_fits(*group.first_incomplete)) return "ranks.groups";
      if (group.last_call && !call_fits(*group.last_call)) return "ranks.groups";
    }
  }
  return {};
}
}  // namespace
// ---- end of collectives ----

namespace {

constexpr const char* kTypeNames[] = {
    "hello",         "join",          "heartbeat",  "worker_failed",  "node_succeeded", "leave",
    "status",        "welcome",       "waiting",    "round",          "restart",        "stop",
    "complete",      "heartbeat_ack", "error",      "status_reply",   "challenge",      "progress",
    "events",        "events_reply",  "stop_run",   "stop_run_reply", "unhealthy",      "notice",
    "hang_declared", "dump_request",  "collectives"};
static_assert(std::size(kTypeNames) == std::variant_size_v<ControlMessage>);

template <size_t I = 0>
std::optional<ControlMessage> decode_as(const std::string& type, const json& in) {
  if constexpr (I == std::variant_size_v<ControlMessage>) {
    return std::nullopt;
  } else {
    if (type == kTypeNames[I]) {
      return ControlMessage(std::in_place_index<I>,
                            in.get<std::variant_alternative_t<I, ControlMessage>>());
    }
    return decode_as<I + 1>(type, in);
  }
}

// Every number of the protocol is an integer, and every one fits an int except the durations
// ("*_ms"), which fit an int64_t: nlohmann would otherwise cast 1e300 to int (undefined) or wrap
// 2^32 + 1 to 1.
bool integer_fits(const json& number, std::string_view key) {
  bool duration = key.size() > 3 && key.substr(key.size() - 3) == "_ms";
  if (number.is_number_unsigned()) {
    return number.get<uint64_t>() <=
           (duration ? uint64_t{INT64_MAX} : static_cast<uint64_t>(INT32_MAX));
  }
  if (!number.is_number_integer()) return false;
  int64_t value = number.get<int64_t>();
  return duration || (value >= INT32_MIN && value <= INT32_MAX);
}

// Checks every number in `root`, walking with a stack of its own rather than recursing.
bool integers_fit(const json& root, std::string& error) {
  std::vector<std::pair<const json*, std::string_view>> pending{{&root, ""}};
  while (!pending.empty()) {
    auto [value, key] = pending.back();
    pending.pop_back();
    if (value->is_object()) {
      for (auto item = value->begin(); item != value->end(); ++item) {
        pending.emplace_back(&*item, item.key());  // a reference to the key stored in `root`
      }
    } else if (value->is_array()) {
      for (const json& item : *value) pending.emplace_back(&item, key);
    } else if (value->is_number() && !integer_fits(*value, key)) {
      error = "\"" + std::string(key) + "\": " + value->dump() + " is not a valid integer";
      return false;
    }
  }
  return true;
}

bool in_range(int64_t value, int64_t low, int64_t high) { return value >= low && value <= high; }

// A text field over its bound: "node_id is 70000 bytes, over 255"; empty when within.
std::string too_long(const char* field, const std::string& text, size_t bound) {
  if (text.size() <= bound) return {};
  return cat(field, " is ", text.size(), " bytes, over ", bound);
}

// What a node says of itself, bounded where it enters (it is kept and shown to everyone).
std::string oversized(const ControlMessage& message) {
  if (const auto* hello = std::get_if<Hello>(&message)) {
    for (std::string problem :
         {too_long("node_id", hello->node_id, kMaxNodeIdBytes),
          too_long("address", hello->address, kMaxAddressBytes),
          too_long("last_round_at", hello->last_round_at, kMaxEndpointBytes)}) {
      if (!problem.empty()) return problem;
    }
    if (hello->outcome && hello->outcome->failure) {
      return too_long("outcome.failure.host", hello->outcome->failure->host, kMaxHostBytes);
    }
  } else if (const auto* failed = std::get_if<WorkerFailed>(&message)) {
    return too_long("host", failed->host, kMaxHostBytes);
  }
  return {};
}

// The bounds of control_messages.hpp, for the messages whose numbers the daemon computes with.
std::string out_of_range(const ControlMessage& message) {
  if (const auto* hello = std::get_if<Hello>(&message)) {
    const WireRunConfig& config = hello->config;
    if (!in_range(hello->local_world_size, 1, kMaxLocalWorldSize)) return "local_world_size";
    if (!in_range(hello->last_round, -1, kMaxRound)) return "last_round";
    if (!in_range(hello->restarts_used, 0, kMaxRound)) return "restarts_used";
    if (!in_range(hello->last_round_nodes, 0, kMaxNodes)) return "last_round_nodes";
    if (hello->rank_hint && !in_range(*hello->rank_hint, 0, kMaxNodes)) return "rank_hint";
    if (hello->unhealthy.size() > kMaxHealthReasonBytes) return "unhealthy";
    if (!in_range(hello->rank0_port, 0, 65535)) return "rank0_port";
    if (!in_range(hello->age_ms, -1, kMaxAgentAgeMs)) return "age_ms";
    if (const auto& outcome = hello->outcome) {
      if (!in_range(outcome->round, 0, hello->last_round)) return "outcome.round";
      if (outcome->failure && (outcome->failure->round != outcome->round ||
                               outcome->failure->rank < 0 || outcome->failure->local_rank < 0 ||
                               outcome->failure->description.size() > kMaxFailureTextBytes ||
                               outcome->failure->final_reason.size() > kMaxFailureTextBytes)) {
        return "outcome.failure";
      }
    }
    if (!in_range(config.min_nodes, 1, kMaxNodes)) return "config.min_nodes";
    if (!in_range(config.max_nodes, config.min_nodes, kMaxNodes)) return "config.max_nodes";
    if (config.max_restarts < 0) return "config.max_restarts";
    if (config.fallbacks.size() > kMaxFallbackListBytes) return "config.fallbacks";
    if (!in_range(config.host_failure_limit, 0, kMaxRound)) return "config.host_failure_limit";
    for (int64_t ms : {config.last_call_ms, config.join_timeout_ms, config.heartbeat_timeout_ms,
                       config.host_cooldown_ms}) {
      if (!in_range(ms, 0, kMaxDurationMs)) return "config timeouts";
    }
  } else if (const auto* join = std::get_if<Join>(&message)) {
    if (!in_range(join->rank0_port, 0, 65535)) return "rank0_port";
  } else if (const auto* failed = std::get_if<WorkerFailed>(&message)) {
    if (!in_range(failed->round, 0, kMaxRound)) return "round";
    if (failed->rank < 0 || failed->local_rank < 0) return "rank";
    if (failed->cause.size() > kMaxFailureCauseBytes) return "cause";
    if (failed->description.size() > kMaxFailureTextBytes) return "description";
    if (failed->final_reason.size() > kMaxFailureTextBytes) return "final_reason";
    if (failed->summary.size() > kMaxFailureSummaryBytes) return "summary";
  } else if (const auto* round = std::get_if<RoundAssigned>(&message)) {
    return round_out_of_range(*round);
  } else if (const auto* stop = std::get_if<Stop>(&message)) {
    if (!in_range(stop->exit_status, 0, 255)) return "exit_status";
  } else if (const auto* succeeded = std::get_if<NodeSucceeded>(&message)) {
    if (!in_range(succeeded->round, 0, kMaxRound)) return "round";
  } else if (const auto* progress = std::get_if<Progress>(&message)) {
    return progress_out_of_range(*progress);
  } else if (const auto* declared = std::get_if<HangDeclared>(&message)) {
    if (!in_range(declared->round, 0, kMaxRound)) return "round";
    if (!in_range(declared->dump_timeout_ms, 0, kMaxDurationMs)) return "dump_timeout_ms";
  } else if (const auto* request = std::get_if<DumpRequest>(&message)) {
    if (!in_range(request->round, 0, kMaxRound)) return "round";
  } else if (const auto* collectives = std::get_if<Collectives>(&message)) {
    return collectives_out_of_range(*collectives);
  } else if (const auto* stop = std::get_if<StopRunRequest>(&message)) {
    if (stop->reason.size() > kMaxStopReasonBytes) return "reason";
    if (stop->by.size() > kMaxStopByBytes) return "by";
    if (stop->client_nonce.size() > kMaxClientNonceBytes) return "client_nonce";
  } else if (const auto* status = std::get_if<StatusRequest>(&message)) {
    if (status->client_nonce.size() > kMaxClientNonceBytes) return "client_nonce";
    if (status->own_node_prefix.size() > kMaxNodeIdBytes) return "own_node_prefix";
  } else if (const auto* events = std::get_if<EventsRequest>(&message)) {
    if (events->client_nonce.size() > kMaxClientNonceBytes) return "client_nonce";
  } else if (const auto* sick = std::get_if<Unhealthy>(&message)) {
    if (sick->reason.size() > kMaxHealthReasonBytes) return "reason";
  } else if (const auto* leave = std::get_if<Leave>(&message)) {
    if (leave->reason.size() > kMaxFailureTextBytes) return "reason";
    if (leave->moved_to.size() > kMaxEndpointBytes) return "moved_to";
  } else if (const auto* events = std::get_if<EventsReply>(&message)) {
    if (events->dropped < 0) return "dropped";
  } else if (const auto* status = std::get_if<StatusReply>(&message)) {
    if (!in_range(status->port, 0, 65535)) return "port";
    for (const StatusRun& run : status->runs) {
      if (!in_range(run.store_port, 0, 65535)) return "store_port";
      if (run.more_nodes < 0) return "more_nodes";
      if (run.live_nodes < -1) return "live_nodes";
      if (!in_range(run.resumed_after, -1, kMaxRound)) return "resumed_after";
    }
  }
  return {};
}

// Text from workers (a failure summary quotes their stderr) may be any bytes: invalid UTF-8
// becomes U+FFFD instead of an exception.
std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The digest (answer_digest) of `in`, a message's JSON object: without its "proof", written as
// the daemon writes it (dump() sorts the keys, and a parsed text is written back as it was).
std::string digest_without_proof(json& in) {
  in.erase("proof");
  return sha256_hex(dump(in));
}

// An answer's digest, from the text that came (its proof already decoded, so taken out of `in`).
void note_answer_digest(ControlMessage& message, json& in) {
  std::visit(
      [&](auto& typed) {
        if constexpr (requires { typed.digest; }) typed.digest = digest_without_proof(in);
      },
      message);
}

json to_json_object(const ControlMessage& message) {
  json out;
  std::visit([&](const auto& typed) { out = typed; }, message);
  out["type"] = message_type(message);
  return out;
}

// A parsed object with its "type": the message, or nullopt with `error` set. An answer's
// "proof" is taken out of `in` (note_answer_digest).
std::optional<ControlMessage> decode_object(json& in, std::string& error) {
  auto type = in.find("type");
  if (type == in.end() || !type->is_string()) {
    error = "frame has no \"type\"";
    return std::nullopt;
  }
  std::string problem;
  if (!integers_fit(in, problem)) {
    error = "bad \"" + type->get<std::string>() + "\" message: " + problem;
    return std::nullopt;
  }
  try {
    std::optional<ControlMessage> message = decode_as(type->get<std::string>(), in);
    if (!message) {
      error = "unknown message type \"" + type->get<std::string>() + "\"";
    } else if (std::string field = out_of_range(*message); !field.empty()) {
      error = "bad \"" + type->get<std::string>() + "\" message: " + field + " out of range";
      return std::nullopt;
    } else if (std::string problem = oversized(*message); !problem.empty()) {
      error = "bad \"" + type->get<std::string>() + "\" message: " + problem;
      return std::nullopt;
    }
    if (message) note_answer_digest(*message, in);
    return message;
  } catch (const json::exception& failure) {
    error = "bad \"" + type->get<std::string>() + "\" message: " + failure.what();
    return std::nullopt;
  }
}

}  // namespace

const char* message_type(const ControlMessage& message) { return kTypeNames[message.index()]; }

std::string answer_digest(const ControlMessage& answer) {
  json covered = to_json_object(answer);
  return digest_without_proof(covered);
}

std::string encode_message(const ControlMessage& message) { return dump(to_json_object(message)); }

// Through dump() itself, so that the text is the one encode_message writes, whatever rule the
// JSON library follows to replace a bad sequence (one U+FFFD per longest invalid prefix).
std::string as_sent(std::string_view text) {
  return json::parse(dump(json(std::string(text)))).get<std::string>();
}

std::string cut_at_character(std::string text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && continues_utf8_character(text[end])) --end;
  text.resize(end);
  return text;
}

std::optional<ControlMessage> decode_message(const std::string& payload, std::string& error) {
  json in = parse_untrusted_json(payload);
  if (in.is_discarded() || !in.is_object()) {
    error = "frame is not a JSON object";  // or one nested deeper than kMaxJsonDepth
    return std::nullopt;
  }
  return decode_object(in, error);
}

std::string encode_status_document(const StatusReply& status) { return dump(json(status)); }

std::optional<StatusReply> decode_status_document(const std::string& text, std::string& error) {
  json in = parse_untrusted_json(text);
  if (in.is_discarded() || !in.is_object()) {
    error = "status is not a JSON object";
    return std::nullopt;
  }
  in["type"] = message_type(StatusReply{});
  std::optional<ControlMessage> message = decode_object(in, error);
  if (!message) return std::nullopt;
  return std::get<StatusReply>(std::move(*message));
}

}  // namespace cohort::proto
