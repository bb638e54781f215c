// libFuzzer target: the rendezvous state machine (RunState) and the gathering of a hang's dumps
// (DumpGathering), driven as the daemon drives them by up to eight agents whose every message the
// fuzzer chooses: hellos with any settings, joins, failed health checks, failures, progress, hang
// declarations, dumps, successes, leaves, silences and time. Each message is built, encoded and
// decoded first, so only what the daemon's decoder lets through reaches the state machine, and the
// daemon's own checks of a hello come before it. Checks that nothing crashes, overflows (UBSan) or
// loops, and that: a round's ranks are 0..n-1 with the world size their sum; rounds only grow; an
// ended run stays ended; and after a tick at t no deadline is left at or before t (the daemon's
// timer would spin).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "proto/control_messages.hpp"
#include "rendezvous/dump_gathering.hpp"
#include "rendezvous/from_wire.hpp"
#include "rendezvous/run_state.hpp"

namespace {

using namespace cohort;
using rdzv::Ms;
using rdzv::TimePoint;

void require(bool condition) {
  if (!condition) std::abort();
}

constexpr int kAgents = 8;
constexpr int64_t kMinHeartbeatTimeoutMs = 200;  // the daemon's (rendezvous/daemon.hpp)
constexpr Ms kDumpSlack{2000};                   // the daemon's, after a node's dump timeout
constexpr Ms kMaxDumpWait{600000};

// Only what the daemon's decoder accepts: the message encoded and decoded again, as it came.
template <typename Message>
std::optional<Message> through_the_wire(const Message& message) {
  std::string error;
  std::optional<proto::ControlMessage> decoded =
      proto::decode_message(proto::encode_message(proto::ControlMessage(message)), error);
  if (!decoded) return std::nullopt;
  const Message* typed = std::get_if<Message>(&*decoded);
  require(typed != nullptr);
  return *typed;
}

// Numbers that reach the edges of what the decoder allows as well as the ordinary ones.
int pick_int(FuzzedDataProvider& in, int ordinary_max, int64_t edge) {
  switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0:
      return static_cast<int>(std::clamp<int64_t>(edge, INT32_MIN, INT32_MAX));
    case 1:
      return in.ConsumeIntegral<int>();
    default:
      return in.ConsumeIntegralInRange(-1, ordinary_max);
  }
}

int64_t pick_ms(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0:
      return proto::kMaxDurationMs;
    case 1:
      return in.ConsumeIntegral<int64_t>();
    default:
      return in.ConsumeIntegralInRange<int64_t>(0, 5000);
  }
}

proto::WireRunConfig pick_config(FuzzedDataProvider& in) {
  proto::WireRunConfig config;
  config.min_nodes = pick_int(in, kAgents, proto::kMaxNodes);
  config.max_nodes = std::max(config.min_nodes, pick_int(in, kAgents, proto::kMaxNodes));
  config.max_restarts = pick_int(in, 4, INT32_MAX);
  config.last_call_ms = pick_ms(in);
  config.join_timeout_ms = pick_ms(in);
  config.heartbeat_timeout_ms = std::max<int64_t>(kMinHeartbeatTimeoutMs, pick_ms(in));
  config.host_failure_limit = pick_int(in, 3, INT32_MAX);
  config.host_cooldown_ms = pick_ms(in);
  return config;
}

// One agent, as the daemon knows it: its session and what its hello said.
struct Agent {
  bool connected = false;
  int generation = 0;  // a new connection is a new agent process: a new node id
  rdzv::NodeInfo info;
  rdzv::RunConfig config;
};

class Harness {
 public:
  explicit Harness(FuzzedDataProvider& in) : in_(in) {}

  void step() {
    act(in_.ConsumeIntegralInRange(0, kAgents - 1));
    if (state_ && state_->empty()) forget_run();  // the daemon reaps a run without nodes
  }

 private:
  void act(int who) {
    switch (in_.ConsumeIntegralInRange(0, 12)) {
      case 0:
      case 1:
        return hello(who);
      case 2:
        return member(who,
                      [&] { apply(state_->join(agents_[who].info, agents_[who].config, now_)); });
      case 3:
        return member(who, [&] { worker_failed(who); });
      case 4:
        return member(who, [&] { progress(who); });
      case 5:
        return member(who, [&] { hang_declared(who); });
      case 6:
        return member(who, [&] { collectives(who); });
      case 7:
        return member(who, [&] { succeeded(who); });
      case 8:
        return close(who, "connection closed (eof)");
      case 9:
        if (state_) apply(state_->cancel(in_.ConsumeIntegralInRange(0, 255), "stopped"));
        return;
      case 10:
        return member(who, [&] { unhealthy(who); });
      default:
        return pass_time();
    }
  }

  void forget_run() {
    state_.reset();
    run_config_.reset();
    members_.clear();
    dumps_.reset();
    dumps_deadline_.reset();
    last_round_ = -1;
    ended_ = false;
  }

  std::string id_of(int who) const {
    return "n" + std::to_string(who) + "-" + std::to_string(agents_[who].generation);
  }
  std::string host_of(int who) { return "host" + std::to_string(who % 3); }

  void hello(int who) {
    Agent& agent = agents_[who];
    if (agent.connected) return close(who, "bad hello");  // one hello per connection
    proto::Hello hello;
    ++agent.generation;
    hello.run_id = "job";
    hello.node_id = id_of(who);
    hello.address = host_of(who);
    hello.local_world_size = in_.ConsumeBool() ? in_.ConsumeIntegralInRange(1, 4)
                                               : pick_int(in_, 8, proto::kMaxLocalWorldSize);
    if (in_.ConsumeBool()) hello.rank_hint = pick_int(in_, kAgents, proto::kMaxNodes);
    if (in_.ConsumeIntegralInRange(0, 3) == 0) {
      hello.last_round = pick_int(in_, 6, proto::kMaxRound);
      hello.last_round_nodes = pick_int(in_, kAgents, proto::kMaxNodes);
      hello.restarts_used = pick_int(in_, 4, INT32_MAX);
      if (in_.ConsumeBool()) {
        proto::CarriedOutcome outcome{hello.last_round, std::nullopt};
        if (in_.ConsumeBool()) outcome.failure = pick_failure(who);
        hello.outcome = outcome;
      }
    }
    hello.config =
        run_config_ && in_.ConsumeIntegralInRange(0, 3) > 0 ? *run_config_ : pick_config(in_);
    std::optional<proto::Hello> wire = through_the_wire(hello);
    if (!wire || wire->local_world_size < 1 ||
        wire->config.heartbeat_timeout_ms < kMinHeartbeatTimeoutMs) {
      return;  // refused before it reaches the run
    }
    rdzv::RunConfig config = rdzv::from_wire(wire->config);
    if (!state_) {
      state_ = std::make_unique<rdzv::RunState>("job", config, now_);
      run_config_ = wire->config;
    }
    agent.connected = true;
    agent.info = {wire->node_id,          wire->address,
                  wire->local_world_size, wire->rank_hint,
                  wire->last_round,       wire->last_round_nodes,
                  wire->restarts_used,    rdzv::from_wire(wire->outcome)};
    agent.config = config;
    apply(state_->join(agent.info, config, now_));
  }

  // A message from a member of the run: what the daemon does for any frame, then the message.
  template <typename Then>
  void member(int who, Then then) {
    if (!agents_[who].connected || !state_ || !state_->has_node(id_of(who))) return;
    state_->heartbeat(id_of(who), now_);
    then();
  }

  proto::WorkerFailed pick_failure(int who) {
    proto::WorkerFailed failed;
    failed.round = pick_round();
    failed.rank = pick_int(in_, 16, INT32_MAX);
    failed.local_rank = pick_int(in_, 4, proto::kMaxLocalWorldSize);
    failed.exit_status = in_.ConsumeIntegralInRange(-1, 300);
    failed.description = "exit code 1";
    failed.host = in_.ConsumeBool() ? host_of(who) : in_.ConsumeRandomLengthString(64);
    failed.summary = in_.ConsumeRandomLengthString(64);
    if (in_.ConsumeIntegralInRange(0, 7) == 0) failed.final_reason = "crash loop";
    failed.cause = in_.ConsumeBool() ? "exit code 1: boom" : in_.ConsumeRandomLengthString(32);
    return failed;
  }

  int pick_round() {
    int current = state_ ? state_->round() : 0;
    switch (in_.ConsumeIntegralInRange(0, 5)) {
      case 0:
        return pick_int(in_, 8, proto::kMaxRound);
      case 1:
        return current - 1;
      default:
        return current;
    }
  }

  void worker_failed(int who) {
    std::optional<proto::WorkerFailed> failed = through_the_wire(pick_failure(who));
    if (!failed) return close(who, "protocol error");
    if (dumps_.active() && dumps_.round() == failed->round) {
      return dumps_.hold(id_of(who), rdzv::from_wire(*failed));
    }
    apply(state_->worker_failed(id_of(who), rdzv::from_wire(*failed), now_,
                                dumps_.verdict(failed->round)));
  }

  void progress(int who) {
    proto::Progress progress;
    progress.round = pick_round();
    progress.hang = in_.ConsumeIntegralInRange(0, 3) == 0;
    progress.hang_timeout_ms = pick_ms(in_);
    progress.straggler_factor_pct = in_.ConsumeIntegralInRange(90, 400);
    progress.host = host_of(who);
    int ranks = in_.ConsumeIntegralInRange(0, 6);
    for (int i = 0; i < ranks; ++i) {
      proto::RankProgress rank;
      rank.local_rank = in_.ConsumeIntegralInRange(-1, 5);
      rank.silent_ms = pick_ms(in_);
      if (in_.ConsumeBool()) rank.step = pick_int(in_, 100, INT32_MAX);
      if (in_.ConsumeBool()) rank.step_ms = pick_ms(in_);
      progress.ranks.push_back(rank);
    }
    std::optional<proto::Progress> wire = through_the_wire(progress);
    if (!wire) return close(who, "protocol error");
    apply(state_->progress(id_of(who), rdzv::from_wire(*wire), now_));
  }

  void hang_declared(int who) {
    proto::HangDeclared hang{pick_round(), pick_ms(in_)};
    std::optional<proto::HangDeclared> wire = through_the_wire(hang);
    if (!wire) return close(who, "protocol error");
    if (state_->phase() != rdzv::RunState::Phase::Running || wire->round != state_->round()) return;
    if (dumps_.round() == wire->round || dumps_.verdict(wire->round)) return;
    auto member = std::find_if(members_.begin(), members_.end(),
                               [&](const rdzv::Assignment& m) { return m.node_id == id_of(who); });
    if (member == members_.end()) return;
    std::map<std::string, rdzv::MemberRanks> ranks;
    for (const rdzv::Assignment& m : members_) {
      ranks[m.node_id] = {m.base_rank, m.local_world_size, m.address};
    }
    TimePoint deadline = now_ + std::min(Ms(wire->dump_timeout_ms), kMaxDumpWait) + kDumpSlack;
    dumps_.start(wire->round, std::move(ranks), deadline);
    dumps_deadline_ = deadline;
  }

  void collectives(int who) {
    proto::Collectives report;
    report.round = pick_round();
    report.host = host_of(who);
    int ranks = in_.ConsumeIntegralInRange(0, 4);
    for (int i = 0; i < ranks; ++i) {
      proto::RankCollectivesReport rank;
      rank.rank = pick_int(in_, 16, INT32_MAX);
      if (in_.ConsumeIntegralInRange(0, 3) == 0) rank.error = "no dump";
      int groups = in_.ConsumeIntegralInRange(0, 2);
      for (int g = 0; g < groups; ++g) rank.collectives.groups.push_back(pick_group());
      report.ranks.push_back(rank);
    }
    std::optional<proto::Collectives> wire = through_the_wire(report);
    if (!wire) return close(who, "protocol error");
    dumps_.reported(id_of(who), *wire);
    if (dumps_.active() && dumps_.complete()) finish_dumps();
  }

  proto::GroupProgress pick_group() {
    proto::GroupProgress group;
    group.id = std::to_string(in_.ConsumeIntegralInRange(0, 2));
    group.desc = "default_pg";
    if (in_.ConsumeBool()) group.size = in_.ConsumeIntegralInRange<int64_t>(-1, 16);
    auto seq = [&] { return in_.ConsumeIntegralInRange<int64_t>(-1, 20); };
    if (in_.ConsumeBool()) group.last_enqueued = seq();
    if (in_.ConsumeBool()) group.last_started = seq();
    if (in_.ConsumeBool()) group.last_completed = seq();
    auto call = [&] {
      proto::CollectiveCall c;
      c.seq = seq();
      c.op = in_.ConsumeBool() ? "all_reduce" : "broadcast";
      c.input_sizes = {{in_.ConsumeIntegralInRange<int64_t>(0, 1024)}};
      c.input_dtypes = {"Float"};
      static const std::array<const char*, 4> kStates{"scheduled", "started", "completed", ""};
      c.state = kStates[in_.ConsumeIntegralInRange<size_t>(0, kStates.size() - 1)];
      return c;
    };
    if (in_.ConsumeBool()) group.first_incomplete = call();
    if (in_.ConsumeBool()) group.last_call = call();
    return group;
  }

  void finish_dumps() {
    dumps_deadline_.reset();
    rdzv::HangVerdict verdict = dumps_.finish();
    if (auto held = dumps_.take_held()) {
      apply(state_->worker_failed(held->first, held->second, now_, &verdict));
    }
  }

  // Its health check failed: it sits out until its next join.
  void unhealthy(int who) {
    apply(state_->park_unhealthy(agents_[who].info, agents_[who].config, "check failed", now_));
  }

  void succeeded(int who) {
    std::optional<proto::NodeSucceeded> wire = through_the_wire(proto::NodeSucceeded{pick_round()});
    if (!wire) return close(who, "protocol error");
    apply(state_->node_succeeded(id_of(who), wire->round, now_));
  }

  // The connection closed (or the daemon closed it): a node of the run is lost.
  void close(int who, const std::string& reason) {
    Agent& agent = agents_[who];
    if (!agent.connected) return;
    agent.connected = false;
    if (state_ && state_->has_node(id_of(who))) apply(state_->node_lost(id_of(who), reason, now_));
  }

  // Time passes; the daemon's timers fire at their deadlines (or later), in order.
  void pass_time() {
    Ms step = in_.ConsumeBool() ? Ms(in_.ConsumeIntegralInRange<int64_t>(0, 3000))
                                : Ms(pick_ms(in_) % (int64_t{48} * 3600 * 1000));
    TimePoint until = now_ + step;
    for (int fired = 0; state_; ++fired) {
      require(fired < 10000);  // a deadline that a tick does not move would spin the daemon
      std::optional<TimePoint> next = state_->next_deadline();
      if (dumps_deadline_ && (!next || *dumps_deadline_ < *next)) next = dumps_deadline_;
      if (!next || *next > until) break;
      now_ = std::max(now_, *next);
      if (dumps_deadline_ && *dumps_deadline_ <= now_) {
        if (dumps_.active()) finish_dumps();
        dumps_deadline_.reset();
        continue;
      }
      apply(state_->tick(now_));
      std::optional<TimePoint> after = state_->next_deadline();
      require(!after || *after > now_);
    }
    now_ = std::max(now_, until);
  }

  void apply(const rdzv::Actions& actions) {
    for (const rdzv::Action& action : actions) {
      if (const auto* start = std::get_if<rdzv::StartRound>(&action)) check_round(*start);
      if (std::holds_alternative<rdzv::RestartMembers>(action)) require(!ended_);
      if (const auto* drop = std::get_if<rdzv::DropNode>(&action))
        dropped_.push_back(drop->node_id);
    }
    rdzv::RunState::Phase phase = state_->phase();
    bool ended =
        phase == rdzv::RunState::Phase::Completed || phase == rdzv::RunState::Phase::Failed;
    require(ended || !ended_);
    ended_ = ended;
    // The daemon closes a dropped node's connection; its close is then a loss.
    std::vector<std::string> dropped;
    dropped.swap(dropped_);
    for (const std::string& id : dropped) {
      for (int who = 0; who < kAgents; ++who) {
        if (agents_[who].connected && id_of(who) == id) close(who, "dropped");
      }
    }
  }

  void check_round(const rdzv::StartRound& start) {
    require(!ended_);
    require(start.round > last_round_);
    last_round_ = start.round;
    const rdzv::RunConfig& config = state_->config();
    int n = static_cast<int>(start.members.size());
    require(n >= 1 && n >= config.min_nodes && n <= config.max_nodes);
    std::vector<const rdzv::Assignment*> by_rank(n, nullptr);
    int64_t world = 0;
    for (const rdzv::Assignment& member : start.members) {
      require(member.round == start.round && member.group_world_size == n);
      require(member.group_rank >= 0 && member.group_rank < n && !by_rank[member.group_rank]);
      by_rank[member.group_rank] = &member;
      world += member.local_world_size;
    }
    int64_t base = 0;
    for (const rdzv::Assignment* member : by_rank) {
      require(member->base_rank == base && member->world_size == world);
      base += member->local_world_size;
    }
    members_ = start.members;
    dumps_.reset();
    dumps_deadline_.reset();
  }

  FuzzedDataProvider& in_;
  std::array<Agent, kAgents> agents_{};
  std::unique_ptr<rdzv::RunState> state_;
  std::optional<proto::WireRunConfig> run_config_;
  TimePoint now_ = TimePoint(std::chrono::hours(24 * 30));  // a machine up for a month
  std::vector<rdzv::Assignment> members_;                   // the current round's
  rdzv::DumpGathering dumps_{size_t{1} << 20};
  std::optional<TimePoint> dumps_deadline_;
  std::vector<std::string> dropped_;
  int last_round_ = -1;
  bool ended_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Harness harness(in);
  for (int steps = 0; steps < 200 && in.remaining_bytes() > 0; ++steps) harness.step();
  return 0;
}
