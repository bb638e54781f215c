// The vocabulary of the rendezvous: a run's settings, a node's description, a round assignment,
// a worker failure report, and the actions the state machine asks its executor (the daemon) to
// carry out. Plain value types shared by the state machine, the daemon and the tests.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace cohort::rdzv {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Ms = std::chrono::milliseconds;

/// Set by the first node that joins a run; every later node must agree on it.
struct RunConfig {
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;
  Ms last_call{std::chrono::seconds(1)};
  Ms join_timeout{std::chrono::seconds(600)};
  Ms heartbeat_timeout{std::chrono::seconds(5)};
  int host_failure_limit = 2;  ///< root-cause failures before a host is excluded; 0: never
  Ms host_cooldown{std::chrono::seconds(60)};  ///< the first exclusion's; doubles each time
  /// Where the run can move to a fallback daemon (--rdzv-fallback, "host:port,..."; empty: none).
  /// With them, after the first round, a round needs more than half of the last round's members
  /// back, so that two daemons never both form one.
  std::string fallbacks;

  bool operator==(const RunConfig&) const = default;
};

struct FailureReport {
  int round = 0;
  int rank = 0;
  int local_rank = 0;
  int exit_status = 1;      ///< the status the agents exit with (code, or 128 + signal)
  std::string description;  ///< "exit code 7" / "signal 11 (SIGSEGV)"
  std::string host;
  std::string summary;       ///< the failing node's formatted failure summary
  std::string final_reason;  ///< not empty: end the run now (a crash loop), whatever is left
  std::string cause;         ///< status and last stderr line, to tell failures apart; may be empty
};

/// What a node rejoining a restarted daemon says of its last round: its workers ended there, and
/// how (a failure, or success when `failure` is empty), reported to the daemon that died.
struct CarriedOutcome {
  int round = 0;
  std::optional<FailureReport> failure;
};

struct NodeInfo {
  std::string node_id;  ///< unique per agent process: address, pid, random part
  std::string address;  ///< --local-addr or the host name, used exactly as given
  int local_world_size = 1;
  std::optional<int> rank_hint;  ///< --node-rank (static mode) or SLURM_NODEID
  int last_round = -1;           ///< the round it was in before a daemon restart, else -1
  int last_round_nodes = 0;      ///< how many nodes that round had
  int restarts_used = 0;         ///< the job-wide count it last heard, for a restarted daemon
  std::optional<CarriedOutcome> outcome;  ///< its workers ended in last_round, unacknowledged
  /// The agent that hosted the rendezvous it lost was a member of last_round and is gone for good.
  bool last_round_host_lost = false;
  /// Where last_round ran when that was another daemon's endpoint (it moved with --rdzv-fallback);
  /// empty: at this one.
  std::string last_round_at;
};

struct Assignment {
  std::string node_id;
  std::string address;
  int round = 0;  ///< TORCHELASTIC_RESTART_COUNT: the same on every node, new every round
  int group_rank = 0;
  int group_world_size = 0;
  int base_rank = 0;  ///< global rank of the node's local rank 0
  int local_world_size = 0;
  int world_size = 0;
};

// Actions: what the state machine decided; the daemon turns them into messages and sockets.

/// Nodes that wait for a round to form: how far it is.
struct WaitingStatus {
  std::vector<std::string> node_ids;
  int joined = 0;
  int min_nodes = 0;
  int max_nodes = 0;
  std::optional<Ms> last_call_in;  ///< time left before the round closes without more nodes
};
/// A round formed: open its worker store, then send each member its assignment.
struct StartRound {
  int round = 0;
  std::vector<Assignment> members;
};
/// Members must stop their workers and join again.
struct RestartMembers {
  std::vector<std::string> node_ids;
  std::string reason;
  Ms backoff{0};          ///< how long the next round waits at least (the restart policy's delay)
  bool scale_up = false;  ///< nodes joined (or came back from a cooldown): no failure
};
/// The run failed for good: every node stops and exits with this status.
struct StopRun {
  std::vector<std::string> node_ids;
  int exit_status = 1;
  std::string reason;
  std::string summary;
};
/// Every member succeeded: every node exits 0.
struct CompleteRun {
  std::vector<std::string> node_ids;
};
/// The run failed before it first formed: too few nodes joined within the join timeout. Recorded
/// as its failure; each node hears the reason in a DropNode of its own, and the id is free again.
struct FormingTimedOut {
  std::string reason;
};
/// The node is refused (settings mismatch, run finished, join timeout) or lost (heartbeats):
/// send it the reason and close its connection.
struct DropNode {
  std::string node_id;
  std::string reason;
  bool lost = false;  ///< lost by heartbeat timeout, rather than refused
  Ms silent{0};       ///< lost: how long it had been silent
};

/// A line for the daemon's log (a straggler named), about the node that reported it.
struct Announce {
  std::string text;
  std::string node_id;
};
/// A host was the root cause too often: it sits out a cooldown, and every node hears why.
struct HostExcluded {
  std::string host;
  int failures = 0;
  Ms cooldown{0};
  std::string text;
  std::vector<std::string> node_ids;  ///< every node of the run
};

using Action = std::variant<WaitingStatus, StartRound, RestartMembers, StopRun, CompleteRun,
                            FormingTimedOut, DropNode, Announce, HostExcluded>;
using Actions = std::vector<Action>;

}  // namespace cohort::rdzv
