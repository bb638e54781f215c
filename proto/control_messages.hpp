// Every message of the control protocol (agent <-> rendezvous daemon), as typed structs, and
// their JSON form {"type": "...", ...}. nlohmann::json stays inside control_messages.cpp.
// proto/PROTOCOL.md documents each message; the two change together. Pure; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "proto/collective_records.hpp"

#include "common/text.hpp"

namespace cohort::proto {

constexpr const char* kControlMagic = "cohort-rdzv";
/// 2: the daemon speaks first, with a challenge; 3: progress, events and stop_run.
constexpr int kControlVersion = 3;

// Bounds every decoded message is checked against, so that no sum or step of the daemon's
// arithmetic can overflow: nodes x workers per node stays below 2^31.
constexpr int kMaxNodes = 100000;
constexpr int kMaxLocalWorldSize = 16384;
constexpr int kMaxRound = 1 << 30;
constexpr int64_t kMaxDurationMs = static_cast<int64_t>(kMaxSeconds) * 1000;  ///< a year

struct WireRunConfig {
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;
  int64_t last_call_ms = 0;
  int64_t join_timeout_ms = 0;
  int64_t heartbeat_timeout_ms = 0;
  int host_failure_limit = 2;        ///< root-cause failures before a host is excluded; 0: never
  int64_t host_cooldown_ms = 60000;  ///< the first exclusion's; doubles each time
  /// The run's fallback endpoints (--rdzv-fallback, "host:port,..."), which every node must give
  /// alike; with them, after its first round, a round needs more than half of the last one's
  /// nodes. Absent from older agents: none.
  std::string fallbacks;
};
/// A hello's list of fallback endpoints may be this long (8 endpoints of the longest names).
constexpr size_t kMaxFallbackListBytes = 4096;

// Agent -> daemon.
struct WorkerFailed {
  int round = 0;
  int rank = 0;
  int local_rank = 0;
  int exit_status = 1;
  std::string description;
  std::string host;
  std::string summary;
  /// Not empty: the failure must end the run, whatever restarts are left (a crash loop, an exit
  /// code listed in --no-restart-exit-codes); says why.
  std::string final_reason;
  /// What the failure is, for telling two apart across nodes: its status and its last stderr
  /// line ("exit code 1: ValueError: boom"); empty from older agents.
  std::string cause;
};
/// A failure's cause is cut to this size.
constexpr size_t kMaxFailureCauseBytes = 1024;
/// A failure's description and final reason, and a leave's reason, are cut to this size by the
/// agent and refused past it by the daemon: they become restart and stop reasons, which every
/// status reply and event of the run carries.
constexpr size_t kMaxFailureTextBytes = 1024;
/// A failure's summary (every failed worker's entry, error file and stderr tail) is cut to this
/// size by the agent (the middle goes) and refused past it by the daemon: as JSON it may take six
/// times that (every byte a \u escape), which must still fit in a frame.
constexpr size_t kMaxFailureSummaryBytes = 128 * 1024;
/// A round's master_addr: a host name or an IP literal, no spaces or control characters.
constexpr size_t kMaxMasterAddrBytes = 255;
/// In a hello: how this node's workers ended in `round`, reported but not yet answered (the
/// daemon may have died before it read the report). The daemon's next word about the run is the
/// acknowledgment.
struct CarriedOutcome {
  int round = 0;
  std::optional<WorkerFailed> failure;  ///< absent: every worker exited 0
};
/// Bounds of what a node says of itself (hello's node_id and address, a failure's host): what
/// the daemon keeps for every node and shows in every status reply and page.
constexpr size_t kMaxNodeIdBytes = 255;
constexpr size_t kMaxAddressBytes = 255;
constexpr size_t kMaxHostBytes = 255;
/// A hello's last_round_at: a rendezvous endpoint as the agent was given it ("host:port").
constexpr size_t kMaxEndpointBytes = 272;
/// A carried failure's summary is cut to this size: a hello must fit kMaxFirstFrameBytes.
constexpr size_t kMaxCarriedSummaryBytes = 8 << 10;
struct Hello {  ///< first frame of every connection: who I am, which run, its settings
  std::string magic = kControlMagic;
  int version = kControlVersion;
  std::string run_id;
  std::string node_id;
  std::string address;
  int local_world_size = 1;
  std::optional<int> rank_hint;
  int last_round = -1;
  int last_round_nodes = 0;  ///< how many nodes that round had; 0 before the first
  int restarts_used = 0;
  WireRunConfig config;
  int rank0_port = 0;  ///< classic worker store: the port this node's rank 0 would bind, else 0
  std::string client_nonce;  ///< the agent's challenge to the daemon (proto/auth.hpp)
  std::string proof;         ///< hello_proof under the run's token; empty without a token
  std::optional<CarriedOutcome> outcome;
  /// Not empty: the node's health check failed (why): it connects but does not join a round.
  std::string unhealthy;
  /// How long ago the agent started, in ms; -1: not said (an older agent). An agent started
  /// before its run ended that joins only afterwards hears how the run ended.
  int64_t age_ms = -1;
  /// This agent's own process hosts the daemon it says hello to (`cohort run` without cohortd):
  /// the daemon tells the members of each round whether its host is one of them.
  bool hosts_rendezvous = false;
  /// The agent that hosted the rendezvous this agent lost was a member of `last_round` and is
  /// gone for good (its daemon lived in it and refused the reconnection): a daemon that has the
  /// rest of that round back forms its first round without waiting for the last call.
  bool last_round_host_lost = false;
  /// Where `last_round` ran, when that is another endpoint than the one this hello goes to (the
  /// agent moved with --rdzv-fallback): "host:port" as the agent was given it; else empty.
  std::string last_round_at;
};
constexpr int64_t kMaxAgentAgeMs = 10 * kMaxDurationMs;  ///< a hello's age_ms: ten years
/// Bounds of a health check's reason (the tail of the command's output).
constexpr size_t kMaxHealthReasonBytes = 4096;
/// The node's health check failed (after a restart, or again while it waits): it leaves the
/// round's candidates, and joins again with `join` once a check passes.
struct Unhealthy {
  std::string reason;
};
struct Join {  ///< ready for the next round (after a restart)
  int rank0_port = 0;
};
struct Heartbeat {};
struct NodeSucceeded {
  int round = 0;
};
struct Leave {
  std::string reason;
  /// Not empty: the node leaves for this endpoint, where its run is ("host:port"; at most
  /// kMaxEndpointBytes): a daemon left with none of the run's nodes says where it went.
  std::string moved_to;
};
struct StatusRequest {
  std::string run_id;        ///< the run to show; empty: every run (needs the daemon's own token)
  std::string proof;         ///< status_proof under the token; empty without a token
  std::string client_nonce;  ///< the tool's challenge to the daemon; empty without a token
  /// An agent's question (rendezvous/run_probe.*): each run's summary and its live nodes counted
  /// (StatusRun::live_nodes), no node or rank listed. A daemon that predates it lists them all.
  bool brief = false;
  /// Brief only: nodes whose id starts with it are not counted (the asking agent's own).
  std::string own_node_prefix;
};

/// `cohort status --events RUN`: the events the daemon holds for one run (docs/EVENTS.md).
struct EventsRequest {
  std::string run_id;
  std::string proof;  ///< events_proof under the daemon's or the run's token; empty without one
  std::string client_nonce;  ///< the tool's challenge to the daemon; empty without a token
};
/// `cohort stop`: ends the run cleanly; every agent stops its workers and exits 130.
struct StopRunRequest {
  std::string run_id;
  std::string reason;  ///< recorded in the run.stopped event and each agent's log
  std::string proof;   ///< stop_proof under the daemon's or the run's token; empty without one
  std::string by;      ///< who asks, "user@host" as the asking machine names them; may be empty
  std::string client_nonce;  ///< the tool's challenge to the daemon; empty without a token
};
/// Bound of a request's client_nonce (random_nonce makes 64 hex digits).
constexpr size_t kMaxClientNonceBytes = 256;
/// Bounds of a stop request's reason and of its `by`.
constexpr size_t kMaxStopReasonBytes = 1024;
constexpr size_t kMaxStopByBytes = 256;

// ---- Progress of the workers (hang root cause across nodes, stragglers): agent -> daemon ----
/// Bounds of a progress report: a host name, and a straggler factor in percent (150 = 1.5 x).
constexpr size_t kMaxProgressHostBytes = 255;
constexpr int kMinStragglerFactorPercent = 101;
constexpr int kMaxStragglerFactorPercent = 100000;
/// One local rank's progress, measured on the agent's own steady clock at the time it sends.
struct RankProgress {
  int local_rank = 0;
  int64_t silent_ms = 0;           ///< since its last sign of life (or its start, before one)
  std::optional<int> step;         ///< the last step a heartbeat reported
  std::optional<int64_t> step_ms;  ///< the median duration of its last steps
};
struct Progress {
  int round = 0;
  bool hang = false;  ///< sent just before worker_failed: this node declared a worker hung
  int64_t hang_timeout_ms = 0;     ///< the node's --hang-timeout; 0: off
  int straggler_factor_pct = 150;  ///< the node's --straggler-factor, in percent
  std::string host;
  std::vector<RankProgress> ranks;  ///< at most local_world_size; extra ones are ignored
};
// In `status_reply`: the slowest ranks of the running round, against the median step time.
struct StatusRank {
  int rank = 0;
  std::string node;  ///< "host (address)"
  int64_t step_ms = 0;
};
// ---- end of progress ----

// ---- Which collective, which rank (the NCCL flight recorder read across every rank) ----
/// Agent -> daemon, when one of its workers is declared hung (before its dumps are in): ask
/// every other node of the round for its ranks' flight-recorder dumps.
struct HangDeclared {
  int round = 0;
  int64_t dump_timeout_ms = 0;  ///< the node's --hang-dump-timeout: how long the others may take
};
/// Daemon -> agent: ask each local rank's flight recorder for a dump now, and send `collectives`
/// once they are written (or the node's --hang-dump-timeout has passed).
struct DumpRequest {
  int round = 0;
};
/// One local rank's dump, reduced; `error` set (and no groups) when it has none that reads.
struct RankCollectivesReport {
  int rank = 0;  ///< global
  std::string error;
  RankCollectives collectives;
};
/// Agent -> daemon: its ranks' dumps, reduced, after a hang was declared in `round`. At most
/// local_world_size ranks, kMaxSentProcessGroups groups each, strings and lists capped.
struct Collectives {
  int round = 0;
  std::string host;
  std::vector<RankCollectivesReport> ranks;
};
// ---- end of collectives ----

// Daemon -> agent.
struct Challenge {  ///< the first frame of every connection: what the peer's proof must cover
  std::string nonce;
};
struct Welcome {
  int version = kControlVersion;
  std::string proof;  ///< welcome_proof: the daemon holds the token too; empty without one
  /// The daemon lives in a `cohort run` agent: gone with it for good, never restarted in place
  /// (absent from older daemons: false).
  bool agent_hosted = false;
};
struct Waiting {
  int joined = 0;
  int min_nodes = 0;
  int max_nodes = 0;
  std::optional<int64_t> last_call_in_ms;
};
struct RoundAssigned {
  int round = 0;
  int group_rank = 0;
  int group_world_size = 0;
  int base_rank = 0;
  int world_size = 0;
  std::string master_addr;
  int master_port = 0;
  int restarts_used = 0;  ///< failure restarts so far, job-wide
  int max_restarts = 0;
  /// The agent that hosts this daemon (Hello::hosts_rendezvous) is a member of this round.
  bool host_member = false;
};
struct Restart {
  std::string reason;
};
struct Stop {
  int exit_status = 1;
  std::string reason;
  std::string summary;
  std::string stopped_by;  ///< `cohort stop`'s "user@host" when the run was stopped from outside
};
struct Complete {};
/// A line every node of the run logs (a host excluded).
struct Notice {
  std::string text;
};
struct HeartbeatAck {};
struct Error {  ///< sent before the daemon closes the connection
  std::string message;
  bool rejoin = false;  ///< the node was lost (no heartbeat): it may join again as a new node
};
// The answer to `status`: what the daemon knows of every run it has (cohort status prints it).
struct StatusNode {
  std::string node_id;
  std::string address;
  std::string state;    ///< "joining", "member", "restarting", "waiting", "spare", "excluded"
                        ///< or "unhealthy"
  int group_rank = -1;  ///< in the current round; -1 when not a member
  int local_world_size = 0;
  bool succeeded = false;
  int64_t heartbeat_age_ms = 0;  ///< since the node's last frame
  std::string reason;            ///< state "unhealthy": why (its health check's words)
};
struct StatusRun {
  std::string run_id;
  std::string phase;  ///< "forming", "running", "completed" or "failed"
  int round = -1;     ///< -1 before the first round
  int restarts_used = 0;
  int max_restarts = 0;
  int min_nodes = 0;
  int max_nodes = 0;
  int store_port = 0;  ///< the current round's worker store; 0 when there is none
  std::vector<StatusNode> nodes;
  int64_t median_step_ms = 0;       ///< over every rank that reported one; 0: none
  std::vector<StatusRank> slowest;  ///< the slowest ranks, slowest first
  std::string last_failure;         ///< why the run last restarted or stopped; "" if never
  int more_nodes = 0;  ///< nodes not listed in `nodes` (a reply lists kMaxStatusNodes at most)
  /// A brief reply's: the nodes heard within the run's heartbeat timeout, not counting the
  /// request's own_node_prefix; -1 (and left out) in a full one.
  int live_nodes = -1;
  /// The run was taken over by this daemon after its round `resumed_after` (the run's daemon
  /// restarted, or the run moved here): -1 (and left out) when it began here.
  int resumed_after = -1;
  /// Where that round ran, when its nodes said it was another endpoint (--rdzv-fallback).
  std::string moved_from;
};
/// The most nodes one status reply lists, all runs together; the rest are counted in more_nodes.
constexpr int kMaxStatusNodes = 2000;
/// A run whose nodes all left this daemon for another endpoint (rendezvous/moved_runs.*).
struct MovedRun {
  std::string run_id;
  std::string to;  ///< the endpoint its last node left for
};
struct StatusReply {
  int port = 0;  ///< the daemon's control port
  std::vector<StatusRun> runs;
  std::string proof;  ///< answer_proof for the request's client_nonce; left out when empty
  std::vector<MovedRun> moved_runs;  ///< left out when empty
  std::string digest;                ///< set by decode_message (answer_digest); never sent
};
/// The answer to `events`: the run's event lines (without their '\n'), oldest first.
struct EventsReply {
  std::string run_id;
  std::vector<std::string> events;
  int dropped = 0;     ///< older events the daemon no longer holds (its history is bounded)
  std::string proof;   ///< answer_proof for the request's client_nonce; left out when empty
  std::string digest;  ///< set by decode_message (answer_digest); never sent
};
/// The answer to `stop_run`.
struct StopRunReply {
  std::string run_id;
  bool stopped = false;  ///< false: the run had already ended
  int nodes = 0;         ///< nodes told to stop
  std::string proof;     ///< answer_proof for the request's client_nonce; left out when empty
  std::string digest;    ///< set by decode_message (answer_digest); never sent
};

using ControlMessage =
    std::variant<Hello, Join, Heartbeat, WorkerFailed, NodeSucceeded, Leave, StatusRequest, Welcome,
                 Waiting, RoundAssigned, Restart, Stop, Complete, HeartbeatAck, Error, StatusReply,
                 Challenge, Progress, EventsRequest, EventsReply, StopRunRequest, StopRunReply,
                 Unhealthy, Notice, HangDeclared, DumpRequest, Collectives>;

/// JSON text of a message (the payload of one frame).
std::string encode_message(const ControlMessage& message);
/// Parses a frame's payload; nullopt (with `error` set) for bad JSON, an unknown type,
/// missing/mistyped fields, a number that is not an integer (or not a 32-bit one, except the
/// *_ms durations), or a value outside the bounds above.
std::optional<ControlMessage> decode_message(const std::string& payload, std::string& error);
/// What the proof of an answer (status_reply, events_reply, stop_run_reply) covers besides its
/// nonces (proto::answer_proof): SHA-256 of the answer's JSON text without its "proof", keys
/// sorted. The daemon computes it from the answer it sends (its proof still empty);
/// decode_message sets an answer's `digest` from the text that came, so that a field this build
/// does not know is covered too.
std::string answer_digest(const ControlMessage& answer);
/// "hello", "round", ...: the message's type name.
const char* message_type(const ControlMessage& message);

/// The JSON document `cohort status --json` prints: the reply's fields without "type".
std::string encode_status_document(const StatusReply& status);
/// Reads such a document back, checked as decode_message checks a `status_reply`.
std::optional<StatusReply> decode_status_document(const std::string& text, std::string& error);

}  // namespace cohort::proto
