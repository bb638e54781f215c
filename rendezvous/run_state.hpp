// The rendezvous of one run as a pure state machine: nodes join, rounds form (at max nodes, after
// the last call once min have joined, or at once when every survivor of a restart is back),
// ranks are assigned, node loss and worker failures restart every member, one job-wide restart
// budget, a quorum after the first round when the run has fallback daemons, scale-up with waiting
// nodes and spares, hosts excluded after repeated root-cause failures (not for a failure another
// host shared: that is the job's), completion, and (after a daemon restart) the outcomes the
// agents carried over. No I/O and no clock reads: time is passed
// in, decisions come back as Actions, in O(log n) per event unless a round (re)starts. Owned by the
// daemon; one thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/carried_round.hpp"
#include "rendezvous/dump_gathering.hpp"
#include "rendezvous/failure_blame.hpp"
#include "rendezvous/host_exclusions.hpp"
#include "rendezvous/rendezvous_types.hpp"
#include "rendezvous/run_progress.hpp"

namespace cohort::rdzv {

class RunState {
 public:
  enum class Phase { Forming, Running, Completed, Failed };
  enum class Role { Pending, Member, Stopping, Waiting, Spare, Excluded, Unhealthy };

  struct NodeView {
    NodeInfo info;
    Role role;
    int group_rank;  ///< in the current round, -1 if not a member
    bool succeeded;
    TimePoint last_seen;  ///< its last frame
  };

  RunState(std::string run_id, RunConfig config, TimePoint now);
  RunState(const RunState&) = delete;  // nodes point into seen_
  RunState& operator=(const RunState&) = delete;

  /// A node asks to take part in the next round (first join, or rejoin after a restart).
  Actions join(const NodeInfo& node, const RunConfig& config, TimePoint now);
  /// Any frame from the node counts as a heartbeat.
  void heartbeat(const std::string& node_id, TimePoint now);
  /// The node's connection closed, or it left.
  Actions node_lost(const std::string& node_id, const std::string& reason, TimePoint now);
  /// The node's health check failed (its hello said so, or it said so since): it takes part in no
  /// round until it joins again (a member's loss restarts the others), but stays the run's node:
  /// it hears how the run ends, is lost when it falls silent, and when it joins again a member of
  /// the last round still counts toward the quorum. Refused as a join is (an ended run, settings
  /// that differ).
  Actions park_unhealthy(const NodeInfo& node, const RunConfig& config, const std::string& reason,
                         TimePoint now);
  /// `verdict`: what the round's flight-recorder dumps say of a hang (dump_gathering), if they
  /// were gathered: its line leads the restart reason and the summary, and a culprit rank's host
  /// is the one the failure counts against.
  Actions worker_failed(const std::string& node_id, const FailureReport& report, TimePoint now,
                        const HangVerdict* verdict = nullptr);
  Actions node_succeeded(const std::string& node_id, int round, TimePoint now);
  /// A member's report of its workers' progress; Announce actions name new stragglers. After a
  /// report that declares a hang, the failure that follows names the rank that went silent first
  /// across every node as the root cause (in the restart reason and the summary).
  Actions progress(const std::string& node_id, const ProgressReport& report, TimePoint now);
  void set_straggler_window(Ms window) { progress_.set_straggler_window(window); }
  /// Stopped from outside (cohort launch's Ctrl-C, a host it lost): every node hears Stop with
  /// this exit status. Nothing for a run that has already ended.
  Actions cancel(int exit_status, const std::string& reason);
  /// Deadlines: heartbeat timeouts, last call, join timeout, scale-up, restart backoff.
  Actions tick(TimePoint now);
  /// The daemon itself was stopped (its agent's Ctrl-Z, in the same process): it heard no one
  /// meanwhile, through no fault of theirs, so every node counts as heard from at `now`.
  void heard_from_everyone(TimePoint now);
  /// When tick() next has something to do; after tick(t), always later than t (an executor that
  /// sets its timer here would otherwise be woken at once, again and again).
  std::optional<TimePoint> next_deadline() const;
  /// How far the round is, for every waiting node (pending, waiting for a scale-up, spare); no
  /// action when none waits. A join or a loss reports only to the node that joined (none for a
  /// lost one), with a WaitingStatus even when that names nobody: every waiting node's view
  /// changed, and the executor brings them up to date from here, coalesced in time, since telling
  /// all n of them on each of n joins would be n^2 messages.
  Actions waiting_status(TimePoint now) const;

  const std::string& run_id() const { return run_id_; }
  const RunConfig& config() const { return config_; }
  Phase phase() const { return phase_; }
  int round() const { return current_round_; }
  /// The round after which this daemon took the run over (a restarted or fallback daemon, which
  /// its first nodes came to carrying that round); -1: the run began here.
  int resumed_after() const { return carried_round_; }
  /// Where that round ran, as its nodes named it ("host:port"); empty: at this endpoint.
  const std::string& moved_from() const { return moved_from_; }
  int restarts_used() const { return restarts_used_; }
  bool empty() const { return nodes_.empty(); }
  bool has_node(const std::string& node_id) const { return nodes_.count(node_id) > 0; }
  std::vector<NodeView> nodes() const;
  /// The first `limit` of nodes() (in the same order), for a reply that lists only so many: a
  /// copy of every node of 100,000 is 30 MiB, allocated and faulted in on every call.
  std::vector<NodeView> nodes(size_t limit) const;
  size_t node_count() const { return nodes_.size(); }
  /// The nodes heard within the heartbeat timeout, but those whose id starts with `not_prefixed`
  /// (an asking agent's own; empty: none excluded) and the unhealthy ones (in no round, they are
  /// no reason for an agent to follow the run here).
  int live_nodes(TimePoint now, std::string_view not_prefixed) const;
  /// The node's last frame; nullopt for a node the run does not have.
  std::optional<TimePoint> last_seen(const std::string& node_id) const;
  const RunProgress& worker_progress() const { return progress_; }

 private:
  struct Node {
    NodeInfo info;
    Role role = Role::Pending;  ///< changed only through set_role (counted)
    TimePoint last_seen;        ///< changed only through touch (ordered in seen_)
    std::multimap<TimePoint, std::string>::iterator seen;
    uint64_t arrival = 0;
    int group_rank = -1;     ///< rank in the current (or last) round, -1 if none
    bool succeeded = false;  ///< changed only through set_succeeded (counted)
    /// A member of the last round (here, or before this daemon's first round the one a restarted
    /// daemon's node carried): changed only through set_in_last_round (counted while pending).
    bool in_last_round = false;
  };
  /// Who hears how far the round is after an event: nobody, every waiting node, or only the
  /// node the event is about (see waiting_status).
  enum class Report { Nobody, Everyone, OnlyCause };

  Actions refusal(const NodeInfo& node, const RunConfig& config) const;
  Actions admit(const NodeInfo& info, TimePoint now);
  Actions left_role(Role role, const std::string& node_id, const std::string& address,
                    const std::string& reason, TimePoint now);
  Actions try_close(TimePoint now, Report report, const std::string& cause = {});
  Actions close_round(TimePoint now, Report report, const std::string& cause);
  Actions settle_blame(TimePoint now);
  Actions rule_on_carried_round(TimePoint now);
  Actions spend_restart(const FailureReport& report, const std::string& reason, TimePoint now);
  Actions carry_late_report(const std::string& node_id, const CarriedOutcome& outcome,
                            TimePoint now);
  Actions form_round(TimePoint now);
  Actions restart_members(const std::string& reason, TimePoint now, bool scale_up = false);
  Actions time_out();
  Actions expire_heartbeats(TimePoint now);
  Actions exclude_host(const std::string& host, TimePoint now);
  Actions end_exclusions(TimePoint now);
  void wait_for_scale_up(Node& node, TimePoint now);
  void note_exclusion_end(TimePoint end);
  std::string hang_root_cause(TimePoint now) const;
  Actions report_to(const std::string* cause, TimePoint now) const;
  std::vector<Node*> ordered_pending();
  std::vector<std::string> ids_with(std::initializer_list<Role> roles) const;
  std::vector<std::string> all_ids() const;
  int count(Role role) const { return role_counts_[static_cast<size_t>(role)]; }
  /// Forming, fewer nodes are ready or on their way back than the round needs: the join timeout
  /// applies (and only then).
  bool short_of_nodes() const { return !enough_nodes(/*stopping=*/true); }
  /// The nodes a round needs: --nnodes' minimum, and with a quorum (RunConfig::quorum) more than
  /// half of the last round's.
  int needed_nodes() const;
  /// With a quorum, after a first round: how many of the last round's members must be back (more
  /// than half); 0 otherwise. New nodes do not count: they cannot make a cut-off minority whole.
  int quorum() const;
  /// A restarted or fallback daemon, before its first round: every member of the last round is
  /// back but the one known to be gone (last_round_lost_), so no one else is waited for.
  bool last_round_back() const;
  /// A node joining with the round this run last formed (before this daemon's first round: the
  /// newest round its nodes carry, a restarted or fallback daemon's) was one of its members: lost
  /// and back, or moved. A node of an older round (a spare since, or left behind) was not.
  bool carried_last_round(const NodeInfo& info) const;
  /// Before this daemon's first round: a rejoining node's round, its size and the host it lost.
  void note_carried_round(const NodeInfo& node);
  /// Enough of the pending nodes (or, with `stopping`, of those on their way back) to form a
  /// round: --nnodes' minimum, and the quorum of the last round's members.
  bool enough_nodes(bool stopping) const;
  /// The quorum asks for more nodes than --nnodes' minimum, and why (for messages).
  bool quorum_binds() const;
  std::string quorum_text() const;
  /// The unhealthy nodes, which may be why the round is short (for messages); empty without.
  std::string unhealthy_text() const;
  Node& add_node(Node node);
  void erase_node(std::map<std::string, Node>::iterator node);
  void set_role(Node& node, Role role);
  void set_succeeded(Node& node, bool succeeded);
  void set_in_last_round(Node& node, bool in_last_round);
  void touch(Node& node, TimePoint now);

  std::string run_id_;
  RunConfig config_;
  Phase phase_ = Phase::Forming;
  std::map<std::string, Node> nodes_;
  std::array<int, 7> role_counts_{};  ///< nodes per Role
  int succeeded_members_ = 0;         ///< members whose workers all exited 0
  int last_round_pending_ = 0;        ///< pending nodes that were members of the last round
  std::multimap<TimePoint, std::string> seen_;  ///< every node's last_seen and id, oldest first
  uint64_t arrivals_ = 0;
  int next_round_ = 0;
  int current_round_ = -1;
  /// The last round's node count; before this daemon's first round, the largest that a node
  /// carrying the newest round told (a restarted or fallback daemon). 0: none yet, no quorum.
  int last_round_nodes_ = 0;
  int carried_round_ = -1;  ///< before this daemon's first round: the newest round carried
  std::string moved_from_;  ///< where carried_round_ ran, if a node carrying it said elsewhere
  /// Before this daemon's first round: 1 when a rejoining node said the agent that hosted the
  /// rendezvous it lost was a member of the last round and is gone, so the round that has the
  /// rest of the last round's members back need not wait for the last call.
  int last_round_lost_ = 0;
  int restarts_used_ = 0;
  bool regroup_ = false;  ///< forming after a restart: close once every stopping member is back
  TimePoint forming_since_;
  std::optional<TimePoint> not_before_;  ///< restart backoff after a worker failure, until over
  std::optional<TimePoint> last_call_deadline_;
  std::optional<TimePoint> scale_up_deadline_;
  CarriedRound carried_;  ///< a restarted daemon: the outcomes of the round it did not see end
  RunProgress progress_;  ///< the current round's workers, as the members report them
  HostExclusions exclusions_;
  FailureBlame blame_;  ///< whom the last round's failure counts against, once ruled
  std::optional<TimePoint> exclusions_end_;  ///< the earliest end of an excluded node's cooldown
};

/// How long the executor may let every waiting node's view of the round go stale while others
/// join (see waiting_status): 500 ms, and longer as more nodes wait (50 us per waiting node, 5 s
/// at 100,000), so that the refreshes cost at most about 20,000 messages a second however many
/// nodes wait. A fixed period would cost (nodes waiting) x (refreshes while they join): quadratic
/// in the run's size when the joins come at a fixed rate.
Ms waiting_refresh_interval(size_t waiting_nodes);

/// "--nnodes 2:3 differs from the run's 3:3 ..." or empty when the settings agree.
std::string describe_config_difference(const RunConfig& mine, const RunConfig& run);

}  // namespace cohort::rdzv
