#include "rendezvous/run_state.hpp"

#include <algorithm>
#include <climits>
#include <tuple>

#include "common/text.hpp"
#include "rendezvous/restart_policy.hpp"

namespace cohort::rdzv {
namespace {

std::string nnodes_text(const RunConfig& config) {
  return config.min_nodes == config.max_nodes ? std::to_string(config.max_nodes)
                                              : cat(config.min_nodes, ":", config.max_nodes);
}

std::string seconds_text(Ms duration) { return cat(duration.count() / 1000.0, " s"); }

}  // namespace

std::string describe_config_difference(const RunConfig& mine, const RunConfig& run) {
  std::vector<std::string> differences;
  if (mine.min_nodes != run.min_nodes || mine.max_nodes != run.max_nodes) {
    differences.push_back(
        cat("--nnodes ", nnodes_text(mine), " differs from the run's ", nnodes_text(run)));
  }
  if (mine.max_restarts != run.max_restarts) {
    differences.push_back(
        cat("--max-restarts ", mine.max_restarts, " differs from the run's ", run.max_restarts));
  }
  if (mine.last_call != run.last_call) {
    differences.push_back(cat("last_call_timeout ", seconds_text(mine.last_call),
                              " differs from the run's ", seconds_text(run.last_call)));
  }
  if (mine.join_timeout != run.join_timeout) {
    differences.push_back(cat("join_timeout ", seconds_text(mine.join_timeout),
                              " differs from the run's ", seconds_text(run.join_timeout)));
  }
  if (mine.heartbeat_timeout != run.heartbeat_timeout) {
    differences.push_back(cat("heartbeat_timeout ", seconds_text(mine.heartbeat_timeout),
                              " differs from the run's ", seconds_text(run.heartbeat_timeout)));
  }
  if (mine.host_failure_limit != run.host_failure_limit) {
    differences.push_back(cat("--host-failure-limit ", mine.host_failure_limit,
                              " differs from the run's ", run.host_failure_limit));
  }
  if (mine.host_cooldown != run.host_cooldown) {
    differences.push_back(cat("--host-exclusion-cooldown ", seconds_text(mine.host_cooldown),
                              " differs from the run's ", seconds_text(run.host_cooldown)));
  }
  if (mine.fallbacks != run.fallbacks) {
    auto list = [](const std::string& fallbacks) {
      return fallbacks.empty() ? std::string("none") : fallbacks;
    };
    differences.push_back(cat("--rdzv-fallback ", list(mine.fallbacks), " differs from the run's ",
                              list(run.fallbacks)));
  }
  return join(differences, "; ");
}

RunState::RunState(std::string run_id, RunConfig config, TimePoint now)
    : run_id_(std::move(run_id)),
      config_(config),
      forming_since_(now),
      exclusions_(config.host_failure_limit, config.host_cooldown) {}

// Why a node may not join: the run has ended, or its settings differ; empty when it may.
Actions RunState::refusal(const NodeInfo& node, const RunConfig& config) const {
  if (phase_ == Phase::Completed || phase_ == Phase::Failed) {
    return {DropNode{node.node_id, cat("run '", run_id_, "' has already finished")}};
  }
  if (std::string difference = describe_config_difference(config, config_); !difference.empty()) {
    return {
        DropNode{node.node_id, cat("settings disagree with run '", run_id_, "': ", difference)}};
  }
  return {};
}

Actions RunState::join(const NodeInfo& node, const RunConfig& config, TimePoint now) {
  if (Actions refused = refusal(node, config); !refused.empty()) return refused;
  restarts_used_ = std::max(restarts_used_, node.restarts_used);
  next_round_ = std::max(next_round_, node.last_round + 1);
  if (current_round_ < 0) note_carried_round(node);
  if (current_round_ < 0) carried_.rejoined(node, now, config_.heartbeat_timeout);
  return admit(node, now);
}

Actions RunState::admit(const NodeInfo& info, TimePoint now) {
  auto found = nodes_.find(info.node_id);
  bool excluded = exclusions_.excluded(info.address, now);
  Actions actions;
  if (found != nodes_.end()) {
    Node& node = found->second;
    node.info = info;
    touch(node, now);
    if (current_round_ < 0) set_in_last_round(node, carried_last_round(info));
    if (node.role == Role::Member && phase_ == Phase::Running) {
      // The member left its round (its agent restarted): everyone regroups.
      set_role(node, Role::Pending);
      actions = restart_members(cat("node ", info.address, " left the round"), now);
    } else if ((node.role == Role::Stopping || node.role == Role::Unhealthy) &&
               phase_ == Phase::Running && !excluded) {
      // Back (from a restart, or healthy again) after the round formed without it: as pending it
      // would wait for no round at all; like a new node, it scales the run up, behind the
      // survivors (form_round took its place).
      wait_for_scale_up(node, now);
    } else if (node.role == Role::Stopping || node.role == Role::Member ||
               node.role == Role::Unhealthy) {
      set_role(node, Role::Pending);
    }
    if (excluded) set_role(node, Role::Excluded);
  } else {
    Node node;
    node.info = info;
    node.last_seen = now;
    node.arrival = arrivals_++;
    node.in_last_round = carried_last_round(info);
    if (excluded) node.role = Role::Excluded;
    Node& added = add_node(std::move(node));
    if (!excluded && phase_ == Phase::Running) wait_for_scale_up(added, now);
  }
  if (excluded) {  // a restarting member may have been the last one the round waited for
    note_exclusion_end(*exclusions_.excluded_until(info.address));
    Actions closing = phase_ == Phase::Forming ? try_close(now, Report::Nobody) : Actions();
    actions.insert(actions.end(), closing.begin(), closing.end());
    return actions;
  }
  if (phase_ == Phase::Running) {
    if (count(Role::Member) + count(Role::Waiting) >= config_.max_nodes &&
        count(Role::Waiting) > 0) {
      Actions restart = restart_members("scale-up: new nodes joined", now, /*scale_up=*/true);
      actions.insert(actions.end(), restart.begin(), restart.end());
    } else {
      Actions status = report_to(&info.node_id, now);
      actions.insert(actions.end(), status.begin(), status.end());
    }
    return actions;
  }
  Actions closing = try_close(now, Report::OnlyCause, info.node_id);
  actions.insert(actions.end(), closing.begin(), closing.end());
  return actions;
}

void RunState::heartbeat(const std::string& node_id, TimePoint now) {
  auto found = nodes_.find(node_id);
  if (found != nodes_.end()) touch(found->second, now);
}

Actions RunState::node_lost(const std::string& node_id, const std::string& reason, TimePoint now) {
  auto found = nodes_.find(node_id);
  if (found == nodes_.end()) return {};
  Role role = found->second.role;
  std::string address = found->second.info.address;
  erase_node(found);
  carried_.forget(node_id);
  return left_role(role, node_id, address, reason, now);
}

Actions RunState::park_unhealthy(const NodeInfo& info, const RunConfig& config,
                                 const std::string& reason, TimePoint now) {
  if (Actions refused = refusal(info, config); !refused.empty()) return refused;
  auto found = nodes_.find(info.node_id);
  if (found == nodes_.end()) {  // unhealthy from its hello on: it joins later, if ever
    Node node;
    node.info = info;
    node.last_seen = now;
    node.arrival = arrivals_++;
    node.role = Role::Unhealthy;
    node.in_last_round = carried_last_round(info);
    add_node(std::move(node));
    return {};
  }
  Node& node = found->second;
  touch(node, now);
  Role role = node.role;
  if (role == Role::Unhealthy) return {};  // said again
  // Kept, with its membership of the last round: a member that fails one check and passes the
  // next is back for the quorum, as one lost and back would be.
  set_role(node, Role::Unhealthy);
  progress_.node_gone(info.node_id);
  carried_.forget(info.node_id);
  return left_role(role, info.node_id, node.info.address, "unhealthy: " + reason, now);
}

// What a node's leaving `role` (lost, or unhealthy) means for the others: a member's restarts
// them, the last waiting node's calls off the scale-up, and a round being formed may close.
Actions RunState::left_role(Role role, const std::string& node_id, const std::string& address,
                            const std::string& reason, TimePoint now) {
  if (role == Role::Unhealthy) return {};  // in no round, and waited for by none
  if (phase_ == Phase::Running && role == Role::Member) {
    return restart_members(cat("node ", address, " lost: ", reason), now);
  }
  if (phase_ == Phase::Running && role == Role::Waiting && count(Role::Waiting) == 0) {
    scale_up_deadline_.reset();
  }
  if (phase_ == Phase::Forming) return try_close(now, Report::OnlyCause, node_id);
  return {};
}

Actions RunState::worker_failed(const std::string& node_id, const FailureReport& report,
                                TimePoint now, const HangVerdict* verdict) {
  if (current_round_ < 0) return carry_late_report(node_id, {report.round, report}, now);
  auto found = nodes_.find(node_id);
  if (found != nodes_.end()) blame_.also(report.round, found->second.info.address, report.cause);
  if (phase_ != Phase::Running || report.round != current_round_ || found == nodes_.end() ||
      found->second.role != Role::Member) {
    return {};  // a report about an earlier round, or a consequence of a restart under way
  }
  std::string reason =
      cat("worker rank ", report.rank, " on ", report.host, " failed with ", report.description);
  FailureReport named = report;
  std::string culprit = found->second.info.address;  // the host the failure counts against
  std::string cause = report.cause;
  if (verdict && verdict->attributed) {
    reason = cat(verdict->text, " (", reason, ")");
    named.summary += "collective: " + verdict->text + "\n";
    cause.clear();  // a culprit rank's host is to blame, or none (stuck in the network)
    culprit.clear();
    if (!verdict->culprit_nodes.empty()) {
      auto culprit_node = nodes_.find(verdict->culprit_nodes.front());
      if (culprit_node != nodes_.end()) culprit = culprit_node->second.info.address;
    }
  } else if (std::string root = hang_root_cause(now); !root.empty()) {
    if (verdict) named.summary += "flight recorder: " + verdict->text + "\n";
    reason = cat(root, " (", reason, ")");
    named.summary += "root cause across nodes: " + root + "\n";
    auto root_node = nodes_.find(progress_.silent_root_node());
    if (root_node != nodes_.end()) culprit = root_node->second.info.address;
    cause.clear();  // the root rank's host is to blame, however alike the others' failures
  } else if (verdict) {
    named.summary += "flight recorder: " + verdict->text + "\n";
  }
  if (!named.final_reason.empty() && blame_.repeats_shared(cause)) {
    named.final_reason = cat(kSharedFailureText, "; ", named.final_reason);
    named.summary += cat("cohort: ", kSharedFailureText, "\n");
  }
  if (Actions stop = spend_restart(named, reason, now); !stop.empty()) return stop;
  blame_.first(report.round, culprit, cause);  // ruled on once the members are back
  return restart_members(cat(reason, " (restart ", restarts_used_, "/", config_.max_restarts, ")"),
                         now);
}

// The ruling on the last round's failure, once its members are back (or the last call is over):
// it counts against the host that reported it first, unless another host failed the same way.
Actions RunState::settle_blame(TimePoint now) {
  bool waited = last_call_deadline_ && now >= *last_call_deadline_;
  if (!blame_.pending() || (count(Role::Stopping) > 0 && !waited)) return {};
  std::optional<std::string> host = blame_.settle();  // empty: a failure of no host's
  return host && !host->empty() ? exclude_host(*host, now) : Actions();
}

// Counts a root-cause failure against `host`; at the limit, when the other nodes can still form a
// round, its nodes sit out the cooldown (its members once they are back from the restart under
// way). A run that cannot do without the host keeps it: waiting would only stall the job.
Actions RunState::exclude_host(const std::string& host, TimePoint now) {
  int others = 0;  // the nodes that could form a round without the host
  for (const auto& [id, node] : nodes_) {
    bool available = node.role != Role::Excluded && node.role != Role::Unhealthy;
    if (node.info.address != host && available) ++others;
  }
  std::optional<Exclusion> exclusion =
      exclusions_.failed(host, now, /*can_spare=*/others >= needed_nodes());
  if (!exclusion) return {};
  note_exclusion_end(exclusion->until);
  bool spare = false;  // a node of another host that was no member of the failed round
  for (auto& [id, node] : nodes_) {
    if (node.role == Role::Unhealthy) continue;  // excluded when it joins again, if it is by then
    if (node.info.address == host && node.role != Role::Member && node.role != Role::Stopping)
      set_role(node, Role::Excluded);
    spare = spare || (node.role != Role::Excluded && node.role != Role::Stopping &&
                      node.info.address != host && node.group_rank < 0);
  }
  std::string text = cat("host ", host, " is excluded for ", seconds_text(exclusion->cooldown),
                         ": the root cause of ", exclusion->failures,
                         " failures (--host-failure-limit ", config_.host_failure_limit, "); ",
                         spare ? "a spare takes its place" : "the run goes on without it");
  return {HostExcluded{host, exclusion->failures, exclusion->cooldown, text, all_ids()}};
}

// Nodes whose host's cooldown is over take part again: in the round being formed, or as a
// waiting node or a spare of the running one. Runs when the earliest cooldown ends, and finds the
// next one.
Actions RunState::end_exclusions(TimePoint now) {
  bool readmitted = false;
  exclusions_end_.reset();
  for (auto& [id, node] : nodes_) {
    if (node.role != Role::Excluded) continue;
    if (exclusions_.excluded(node.info.address, now)) {
      note_exclusion_end(*exclusions_.excluded_until(node.info.address));
      continue;
    }
    readmitted = true;
    if (phase_ != Phase::Running) {
      set_role(node, Role::Pending);
      continue;
    }
    wait_for_scale_up(node, now);
  }
  if (!readmitted) return {};
  if (phase_ == Phase::Forming) return try_close(now, Report::Everyone);
  if (phase_ == Phase::Running && count(Role::Member) + count(Role::Waiting) >= config_.max_nodes &&
      count(Role::Waiting) > 0) {
    return restart_members("scale-up: an excluded host's cooldown ended", now, /*scale_up=*/true);
  }
  return {};
}

// A node that comes to a running round it is no member of waits for a scale-up (the last call
// after the first such node, or at once when they fill the round), or beyond max as a spare.
void RunState::wait_for_scale_up(Node& node, TimePoint now) {
  bool room = count(Role::Member) + count(Role::Waiting) < config_.max_nodes;
  set_role(node, room ? Role::Waiting : Role::Spare);
  if (room && !scale_up_deadline_) scale_up_deadline_ = now + config_.last_call;
}

void RunState::note_exclusion_end(TimePoint end) {
  if (!exclusions_end_ || end < *exclusions_end_) exclusions_end_ = end;
}

// Counts a worker failure against the budget: nothing when a restart may follow (after the
// backoff), or the run's end when the budget is spent.
Actions RunState::spend_restart(const FailureReport& report, const std::string& reason,
                                TimePoint now) {
  RestartDecision decision = decide_restart(restarts_used_, config_.max_restarts);
  if (!report.final_reason.empty()) {  // the agent's crash-loop rule: no restart helps
    phase_ = Phase::Failed;
    return {StopRun{all_ids(), report.exit_status, reason + ": " + report.final_reason,
                    report.summary}};
  }
  if (!decision.restart) {
    phase_ = Phase::Failed;
    return {StopRun{all_ids(), report.exit_status, reason, report.summary}};
  }
  ++restarts_used_;
  not_before_ = now + decision.delay;
  return {};
}

Actions RunState::progress(const std::string& node_id, const ProgressReport& report,
                           TimePoint now) {
  auto found = nodes_.find(node_id);
  if (phase_ != Phase::Running || found == nodes_.end() || found->second.role != Role::Member) {
    return {};
  }
  Actions actions;
  for (std::string& line : progress_.report(node_id, report, now)) {
    actions.push_back(Announce{std::move(line), node_id});
  }
  return actions;
}

// After a member declared a hang: the rank that went silent first across every node.
std::string RunState::hang_root_cause(TimePoint now) const {
  return progress_.hang_declared() ? progress_.silent_root_cause(now) : std::string();
}

std::optional<TimePoint> RunState::last_seen(const std::string& node_id) const {
  auto found = nodes_.find(node_id);
  if (found == nodes_.end()) return std::nullopt;
  return found->second.last_seen;
}

Actions RunState::cancel(int exit_status, const std::string& reason) {
  if (phase_ == Phase::Completed || phase_ == Phase::Failed) return {};
  phase_ = Phase::Failed;
  return {StopRun{all_ids(), exit_status, reason, ""}};
}

Actions RunState::node_succeeded(const std::string& node_id, int round, TimePoint now) {
  if (current_round_ < 0) return carry_late_report(node_id, {round, std::nullopt}, now);
  auto found = nodes_.find(node_id);
  if (phase_ != Phase::Running || round != current_round_ || found == nodes_.end() ||
      found->second.role != Role::Member) {
    return {};
  }
  set_succeeded(found->second, true);
  if (succeeded_members_ < count(Role::Member)) return {};
  phase_ = Phase::Completed;
  return {CompleteRun{all_ids()}};
}

Actions RunState::tick(TimePoint now) {
  // A deadline that has passed is no deadline any more: left in next_deadline(), it would
  // bring the executor's timer back at once, again and again, until the round could form.
  if (not_before_ && now >= *not_before_) not_before_.reset();
  Actions actions = expire_heartbeats(now);
  auto add = [&](Actions more) { actions.insert(actions.end(), more.begin(), more.end()); };
  if (exclusions_end_ && now >= *exclusions_end_) add(end_exclusions(now));
  if (phase_ == Phase::Forming) {
    if (short_of_nodes() && now >= forming_since_ + config_.join_timeout) {
      add(time_out());
      return actions;
    }
    add(try_close(now, Report::Nobody));
  } else if (phase_ == Phase::Running && scale_up_deadline_ && now >= *scale_up_deadline_) {
    add(restart_members("scale-up: new nodes joined", now, /*scale_up=*/true));
  }
  return actions;
}

// Too few nodes joined within the join timeout: the run fails, and every node (an unhealthy one
// too, which may be why) hears it.
Actions RunState::time_out() {
  std::string reason =
      cat("rendezvous timed out: ", count(Role::Pending), " of at least ", needed_nodes(),
          " nodes joined within the join timeout (", seconds_text(config_.join_timeout), ")",
          quorum_binds() ? quorum_text() : "", unhealthy_text());
  Actions actions{FormingTimedOut{reason}};
  for (const auto& id : all_ids()) actions.push_back(DropNode{id, reason});
  nodes_.clear();
  role_counts_.fill(0);
  succeeded_members_ = 0;
  last_round_pending_ = 0;
  seen_.clear();
  phase_ = Phase::Failed;
  return actions;
}

Actions RunState::expire_heartbeats(TimePoint now) {
  // Only the expired ones, oldest first in seen_: nodes that go silent one after another cost
  // one step each, not a pass over every node each time.
  std::vector<std::string> expired;
  for (auto it = seen_.begin(); it != seen_.end() && now - it->first >= config_.heartbeat_timeout;
       ++it) {
    expired.push_back(it->second);
  }
  std::sort(expired.begin(), expired.end());  // in the order of the node ids, as always
  Actions actions;
  for (const auto& id : expired) {
    std::string reason = cat("no heartbeat for ", seconds_text(config_.heartbeat_timeout));
    Ms silent = std::chrono::duration_cast<Ms>(now - nodes_.at(id).last_seen);
    actions.push_back(DropNode{id, reason, /*lost=*/true, silent});
    Actions more = node_lost(id, reason, now);
    actions.insert(actions.end(), more.begin(), more.end());
  }
  return actions;
}

std::optional<TimePoint> RunState::next_deadline() const {
  std::optional<TimePoint> next;
  auto consider = [&](TimePoint candidate) {
    if (!next || candidate < *next) next = candidate;
  };
  if (!seen_.empty()) consider(seen_.begin()->first + config_.heartbeat_timeout);
  if (phase_ == Phase::Forming) {
    if (short_of_nodes()) consider(forming_since_ + config_.join_timeout);
    // No round forms before the ruling on a carried round, nor before a restart's backoff ends.
    if (auto carried = carried_.deadline()) {
      consider(*carried);
    } else if (not_before_) {
      consider(*not_before_);
    } else if (last_call_deadline_) {
      consider(*last_call_deadline_);
    }
  }
  if (phase_ == Phase::Running && scale_up_deadline_) consider(*scale_up_deadline_);
  if (exclusions_end_) consider(*exclusions_end_);
  return next;
}

Actions RunState::try_close(TimePoint now, Report report, const std::string& cause) {
  Actions actions = settle_blame(now);
  Actions closing = close_round(now, report, cause);
  actions.insert(actions.end(), closing.begin(), closing.end());
  return actions;
}

Actions RunState::close_round(TimePoint now, Report report, const std::string& cause) {
  if (carried_.pending()) {  // no new round before the ruling on the last one
    if (!carried_.ready(now)) {
      if (report == Report::Nobody) return {};
      return report_to(report == Report::Everyone ? nullptr : &cause, now);
    }
    if (Actions ruled = rule_on_carried_round(now); !ruled.empty()) return ruled;
  }
  int pending = count(Role::Pending);
  bool ready = false;
  if (!enough_nodes(/*stopping=*/false)) {
    last_call_deadline_.reset();
  } else {
    if (!last_call_deadline_) last_call_deadline_ = now + config_.last_call;
    // After a restart the survivors keep their places: a spare that is ready first does not take
    // one while a member is still stopping its workers (the last call bounds the wait).
    bool everyone_back = regroup_ && count(Role::Stopping) == 0;
    bool full = pending >= config_.max_nodes && (!regroup_ || everyone_back);
    ready = full || everyone_back || last_round_back() || now >= *last_call_deadline_;
  }
  if (ready && (!not_before_ || now >= *not_before_)) {
    not_before_.reset();  // the backoff is over
    return form_round(now);
  }
  if (report == Report::Nobody) return {};
  return report_to(report == Report::Everyone ? nullptr : &cause, now);
}

// A restarted daemon, before its first round: a report about the round it did not see end, from
// a node whose workers were still running when it rejoined.
Actions RunState::carry_late_report(const std::string& node_id, const CarriedOutcome& outcome,
                                    TimePoint now) {
  if (phase_ != Phase::Forming) return {};
  carried_.reported(node_id, outcome, now, config_.heartbeat_timeout);
  if (!carried_.pending()) return {};
  return try_close(now, Report::Nobody);
}

// Every node of the round the daemon did not see end is back (or the wait is over): complete the
// run, count the failure that happened while it was down, or go on to form a new round.
Actions RunState::rule_on_carried_round(TimePoint now) {
  switch (carried_.rule()) {
    case CarriedRound::Verdict::Completed:
      phase_ = Phase::Completed;
      return {CompleteRun{all_ids()}};
    case CarriedRound::Verdict::Failed: {
      const FailureReport& failure = carried_.failure();
      std::string reason = cat("worker rank ", failure.rank, " on ", failure.host, " failed with ",
                               failure.description, " while the rendezvous was down");
      return spend_restart(failure, reason, now);
    }
    case CarriedRound::Verdict::NewRound:
      return {};
  }
  return {};
}

std::vector<RunState::Node*> RunState::ordered_pending() {
  std::vector<Node*> pending;
  for (auto& [id, node] : nodes_) {
    if (node.role == Role::Pending) pending.push_back(&node);
  }
  // Survivors keep their order from the last round; new nodes follow by hint, address, arrival.
  auto key = [](const Node* node) {
    bool survivor = node->group_rank >= 0;
    return std::make_tuple(survivor ? 0 : 1, survivor ? node->group_rank : 0,
                           node->info.rank_hint.value_or(INT_MAX), node->info.address,
                           node->arrival);
  };
  std::sort(pending.begin(), pending.end(),
            [&](const Node* a, const Node* b) { return key(a) < key(b); });
  return pending;
}

Actions RunState::form_round(TimePoint now) {
  (void)now;
  std::vector<Node*> pending = ordered_pending();
  size_t members = std::min<size_t>(pending.size(), static_cast<size_t>(config_.max_nodes));
  StartRound start;
  start.round = next_round_++;
  int world_size = 0;
  for (size_t i = 0; i < members; ++i) world_size += pending[i]->info.local_world_size;
  // Only this round's members count toward the next round's quorum, and only they are survivors
  // with a place to keep: a node that sits it out (its workers still stopping, its host excluded,
  // unhealthy) was at most a member of an older round.
  for (auto& [id, node] : nodes_) {
    if (node.role == Role::Pending) continue;
    set_in_last_round(node, false);
    node.group_rank = -1;
  }
  int base_rank = 0;
  for (size_t i = 0; i < pending.size(); ++i) {
    Node& node = *pending[i];
    set_succeeded(node, false);
    set_in_last_round(node, i < members);
    if (i >= members) {
      set_role(node, Role::Spare);
      node.group_rank = -1;
      continue;
    }
    set_role(node, Role::Member);
    node.group_rank = static_cast<int>(i);
    start.members.push_back(Assignment{node.info.node_id, node.info.address, start.round,
                                       static_cast<int>(i), static_cast<int>(members), base_rank,
                                       node.info.local_world_size, world_size});
    base_rank += node.info.local_world_size;
  }
  current_round_ = start.round;
  last_round_nodes_ = static_cast<int>(members);
  last_round_lost_ = 0;
  progress_.round_started(start.members);
  phase_ = Phase::Running;
  regroup_ = false;
  last_call_deadline_.reset();
  scale_up_deadline_.reset();
  return {start};
}

Actions RunState::restart_members(const std::string& reason, TimePoint now, bool scale_up) {
  std::vector<std::string> stopping = ids_with({Role::Member});
  for (auto& [id, node] : nodes_) {
    if (node.role == Role::Member) set_role(node, Role::Stopping);
    if (node.role == Role::Waiting || node.role == Role::Spare) set_role(node, Role::Pending);
  }
  phase_ = Phase::Forming;
  regroup_ = true;
  forming_since_ = now;
  last_call_deadline_.reset();
  scale_up_deadline_.reset();
  Actions actions;
  Ms backoff =
      not_before_ ? std::max(Ms(0), std::chrono::duration_cast<Ms>(*not_before_ - now)) : Ms(0);
  if (!stopping.empty()) actions.push_back(RestartMembers{stopping, reason, backoff, scale_up});
  Actions closing = try_close(now, Report::Everyone);
  actions.insert(actions.end(), closing.begin(), closing.end());
  return actions;
}

Actions RunState::waiting_status(TimePoint now) const { return report_to(nullptr, now); }

// The status for every waiting node (cause null), or for the cause only (none if it is not one).
Actions RunState::report_to(const std::string* cause, TimePoint now) const {
  if (count(Role::Pending) + count(Role::Waiting) + count(Role::Spare) == 0) return {};
  WaitingStatus status;
  if (!cause) {
    status.node_ids = ids_with({Role::Pending, Role::Waiting, Role::Spare});
  } else if (auto found = nodes_.find(*cause);
             found != nodes_.end() && found->second.role != Role::Member &&
             found->second.role != Role::Stopping && found->second.role != Role::Unhealthy) {
    status.node_ids.push_back(*cause);
  }
  status.joined = phase_ == Phase::Forming ? count(Role::Pending) : count(Role::Member);
  status.min_nodes = needed_nodes();
  status.max_nodes = config_.max_nodes;
  if (phase_ == Phase::Forming && last_call_deadline_) {
    status.last_call_in = std::chrono::duration_cast<Ms>(*last_call_deadline_ - now);
  }
  return {status};
}

std::vector<std::string> RunState::ids_with(std::initializer_list<Role> roles) const {
  std::vector<std::string> ids;
  for (const auto& [id, node] : nodes_) {
    if (std::find(roles.begin(), roles.end(), node.role) != roles.end()) ids.push_back(id);
  }
  return ids;
}

std::vector<std::string> RunState::all_ids() const {
  std::vector<std::string> ids;
  for (const auto& [id, node] : nodes_) ids.push_back(id);
  return ids;
}

RunState::Node& RunState::add_node(Node node) {
  node.seen = seen_.emplace(node.last_seen, node.info.node_id);
  ++role_counts_[static_cast<size_t>(node.role)];
  if (node.role == Role::Member && node.succeeded) ++succeeded_members_;
  if (node.role == Role::Pending && node.in_last_round) ++last_round_pending_;
  std::string id = node.info.node_id;
  return nodes_.emplace(std::move(id), std::move(node)).first->second;
}

void RunState::erase_node(std::map<std::string, Node>::iterator node) {
  seen_.erase(node->second.seen);
  progress_.node_gone(node->first);
  --role_counts_[static_cast<size_t>(node->second.role)];
  if (node->second.role == Role::Member && node->second.succeeded) --succeeded_members_;
  if (node->second.role == Role::Pending && node->second.in_last_round) --last_round_pending_;
  nodes_.erase(node);
}

void RunState::set_role(Node& node, Role role) {
  if (node.role == role) return;
  --role_counts_[static_cast<size_t>(node.role)];
  ++role_counts_[static_cast<size_t>(role)];
  if (node.succeeded && node.role == Role::Member) --succeeded_members_;
  if (node.succeeded && role == Role::Member) ++succeeded_members_;
  if (node.in_last_round && node.role == Role::Pending) --last_round_pending_;
  if (node.in_last_round && role == Role::Pending) ++last_round_pending_;
  node.role = role;
}

void RunState::set_in_last_round(Node& node, bool in_last_round) {
  if (node.in_last_round == in_last_round) return;
  if (node.role == Role::Pending) last_round_pending_ += in_last_round ? 1 : -1;
  node.in_last_round = in_last_round;
}

void RunState::set_succeeded(Node& node, bool succeeded) {
  if (node.succeeded == succeeded) return;
  if (node.role == Role::Member) succeeded_members_ += succeeded ? 1 : -1;
  node.succeeded = succeeded;
}

void RunState::heard_from_everyone(TimePoint now) {
  for (auto& [id, node] : nodes_) touch(node, now);
}

void RunState::touch(Node& node, TimePoint now) {
  node.last_seen = now;
  auto handle = seen_.extract(node.seen);
  handle.key() = now;
  node.seen = seen_.insert(std::move(handle));
}

std::vector<RunState::NodeView> RunState::nodes() const { return nodes(nodes_.size()); }

std::vector<RunState::NodeView> RunState::nodes(size_t limit) const {
  std::vector<NodeView> views;
  views.reserve(std::min(limit, nodes_.size()));
  for (const auto& [id, node] : nodes_) {
    if (views.size() >= limit) break;
    bool member = node.role == Role::Member;
    views.push_back(
        {node.info, node.role, member ? node.group_rank : -1, node.succeeded, node.last_seen});
  }
  return views;
}

int RunState::live_nodes(TimePoint now, std::string_view not_prefixed) const {
  int live = 0;
  for (const auto& [id, node] : nodes_) {
    bool excluded = !not_prefixed.empty() && id.starts_with(not_prefixed);
    excluded = excluded || node.role == Role::Unhealthy;
    live += !excluded && now - node.last_seen <= config_.heartbeat_timeout;
  }
  return live;
}

bool RunState::carried_last_round(const NodeInfo& info) const {
  return info.last_round >= 0 &&
         info.last_round == (current_round_ < 0 ? carried_round_ : current_round_);
}

void RunState::note_carried_round(const NodeInfo& node) {
  if (node.last_round > carried_round_) {  // a newer round: its members alone count now
    carried_round_ = node.last_round;
    moved_from_.clear();
    last_round_nodes_ = 0;
    last_round_lost_ = 0;
    for (auto& [id, known] : nodes_) set_in_last_round(known, false);
  }
  if (node.last_round < 0 || node.last_round != carried_round_) return;
  last_round_nodes_ = std::max(last_round_nodes_, node.last_round_nodes);
  if (node.last_round_host_lost) last_round_lost_ = 1;
  if (moved_from_.empty()) moved_from_ = node.last_round_at;
}

int RunState::quorum() const {
  return !config_.fallbacks.empty() && last_round_nodes_ > 0 ? last_round_nodes_ / 2 + 1 : 0;
}

bool RunState::last_round_back() const {
  return current_round_ < 0 && last_round_nodes_ > 0 &&
         last_round_pending_ >= last_round_nodes_ - last_round_lost_;
}

int RunState::needed_nodes() const { return std::max(config_.min_nodes, quorum()); }

bool RunState::enough_nodes(bool stopping) const {
  // Stopping nodes were members of the last round: on their way back, they count for both.
  int on_the_way = stopping ? count(Role::Stopping) : 0;
  return count(Role::Pending) + on_the_way >= config_.min_nodes &&
         last_round_pending_ + on_the_way >= quorum();
}

bool RunState::quorum_binds() const { return needed_nodes() > config_.min_nodes; }

std::string RunState::quorum_text() const {
  return cat(": with --rdzv-fallback a round needs more than half of the last round's ",
             last_round_nodes_, " nodes back, ", last_round_pending_,
             " came (the others may be training with a fallback rendezvous)");
}

std::string RunState::unhealthy_text() const {
  int unhealthy = count(Role::Unhealthy);
  if (unhealthy == 0) return {};
  return cat("; ", unhealthy,
             unhealthy == 1 ? " more node failed its health check"
                            : " more nodes failed their health checks");
}

Ms waiting_refresh_interval(size_t waiting_nodes) {
  constexpr Ms kShortest{500};
  constexpr std::chrono::microseconds kPerNode{50};
  auto scaled = std::chrono::duration_cast<Ms>(kPerNode * static_cast<int64_t>(waiting_nodes));
  return std::max(kShortest, scaled);
}

}  // namespace cohort::rdzv
