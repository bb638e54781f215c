// rdzv_core_bench: the rendezvous daemon's work per agent without the kernel: N simulated agents
// driven in one process through the pure pieces the daemon runs per message, with no socket, no
// Asio and no other thread. What the daemon does per message, mirrored here:
//   hello:      decode the frame's JSON, look the node up and keep it (the daemon's node and
//               settings maps), RunState::join, the node.joined event (EventLog line into the
//               run's EventHistory), encode `welcome` and what the actions ask (`waiting` to the
//               node that joined; every 500 ms of real time, to every waiting node); the join
//               that fills the round forms it: the round.started event naming every member and
//               one `round` frame per member.
//   heartbeat:  decode, RunState::heartbeat, next_deadline (the daemon re-arms its timer from it),
//               encode `heartbeat_ack`.
//   failure:    agent 0's worker_failed (decode, RunState::worker_failed, the events, one
//               `restart` per member), every agent's `join` (decode, RunState::join), the restart
//               backoff passed in as time (RunState::tick), the new round as above.
//   status:     what the daemon builds for `status` (RunState::nodes, at most kMaxStatusNodes
//               listed) and its encoding.
//   complete:   every agent's node_succeeded, the `complete` frames.
// Time is the real clock (passed in), except the restart backoff, which is skipped by passing a
// later time to tick. Wall time and this process's CPU time are measured per phase, and its RSS
// (VmRSS) before the first hello and once the round has formed. Prints one JSON line. Driven by
// bench/growth_bench.py; results in docs/BENCHMARKS.md ("Growth to 100,000 agents").

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/event_log.hpp"
#include "proto/control_frame.hpp"
#include "proto/control_messages.hpp"
#include "rendezvous/event_history.hpp"
#include "rendezvous/run_state.hpp"

namespace cohort {
namespace {

using rdzv::Clock;

double cpu_now_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string prefix = std::string(field) + ":";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return std::atol(line.c_str() + prefix.size());
  }
  return -1;
}

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// One phase's wall and CPU time.
struct Span {
  Clock::time_point wall = Clock::now();
  double cpu = cpu_now_s();
  double wall_ms() const { return ms_between(wall, Clock::now()); }
  double cpu_ms() const { return (cpu_now_s() - cpu) * 1000; }
};

class Core {
 public:
  Core(int agents, int local_world_size, bool scaled_refresh)
      : agents_(agents), local_world_size_(local_world_size), scaled_refresh_(scaled_refresh) {}

  // What the agents send, encoded before the clock starts (the agents' cost, not the daemon's).
  void prepare() {
    hellos_.reserve(static_cast<size_t>(agents_));
    for (int i = 0; i < agents_; ++i) {
      proto::Hello hello;
      hello.run_id = "sim";
      hello.node_id = "sim-node-" + std::to_string(i);
      hello.address = "10." + std::to_string((i >> 16) & 255) + "." +
                      std::to_string((i >> 8) & 255) + "." + std::to_string(i & 255);
      hello.local_world_size = local_world_size_;
      hello.config = {agents_, agents_, 1, 1000, 600000, 600000};
      hello.client_nonce = "0123456789abcdef0123456789abcdef";
      hellos_.push_back(proto::encode_message(hello));
    }
    heartbeat_ = proto::encode_message(proto::Heartbeat{});
    join_ = proto::encode_message(proto::Join{0});
  }

  // Every hello, until the round forms.
  void form() {
    Clock::time_point last_refresh = Clock::now();
    for (int i = 0; i < agents_; ++i) {
      proto::Hello hello = decode<proto::Hello>(hellos_[static_cast<size_t>(i)]);
      if (nodes_.count(hello.node_id) > 0) fail("a node id twice");
      rdzv::RunConfig config{hello.config.min_nodes,
                             hello.config.max_nodes,
                             hello.config.max_restarts,
                             rdzv::Ms(hello.config.last_call_ms),
                             rdzv::Ms(hello.config.join_timeout_ms),
                             rdzv::Ms(hello.config.heartbeat_timeout_ms),
                             hello.config.host_failure_limit,
                             rdzv::Ms(hello.config.host_cooldown_ms)};
      Clock::time_point now = Clock::now();
      if (!state_) state_ = std::make_unique<rdzv::RunState>("sim", config, now);
      rdzv::NodeInfo info{hello.node_id, hello.address, hello.local_world_size, hello.rank_hint};
      nodes_[hello.node_id] = info;
      configs_[hello.node_id] = config;
      send(proto::Welcome{proto::kControlVersion, ""});
      record("node.joined", nlohmann_free_fields(hello.node_id, hello.address));
      apply(state_->join(info, config, now));
      rdzv::Ms period = scaled_refresh_ ? rdzv::waiting_refresh_interval(static_cast<size_t>(i))
                                        : rdzv::Ms(500);  // the daemon's kWaitingRefresh
      if (now - last_refresh >= period) {
        last_refresh = now;
        apply(state_->waiting_status(now));
      }
      state_->next_deadline();
    }
    if (round_ != 0) fail("no round formed");
  }

  // `per_agent` heartbeats from every agent.
  void heartbeats(int per_agent) {
    for (int k = 0; k < per_agent; ++k) {
      for (int i = 0; i < agents_; ++i) {
        decode<proto::Heartbeat>(heartbeat_);
        Clock::time_point now = Clock::now();
        state_->heartbeat(id(i), now);
        state_->next_deadline();
        send(proto::HeartbeatAck{});
      }
    }
  }

  // Agent 0's worker fails; every agent joins again; the new round forms.
  void restart() {
    proto::WorkerFailed failed;
    failed.round = round_;
    failed.exit_status = 1;
    failed.description = "exit code 1";
    failed.host = "sim-host-0";
    failed.summary = "rank 0 (local 0) on sim-host-0: exit code 1\n";
    failed.cause = "exit code 1: RuntimeError: simulated";
    failed = decode<proto::WorkerFailed>(proto::encode_message(failed));
    Clock::time_point failed_at = Clock::now();
    state_->heartbeat(id(0), failed_at);
    record("worker.failed", "{\"node\": \"" + id(0) + "\"}");
    rdzv::FailureReport report{failed.round,       failed.rank,         failed.local_rank,
                               failed.exit_status, failed.description,  failed.host,
                               failed.summary,     failed.final_reason, failed.cause};
    int before = round_;
    apply(state_->worker_failed(id(0), report, failed_at));
    if (restarts_sent_ != agents_) fail("not every agent was told to restart");
    for (int i = 0; i < agents_; ++i) {
      decode<proto::Join>(join_);
      Clock::time_point now = Clock::now();
      state_->heartbeat(id(i), now);
      apply(state_->join(nodes_[id(i)], configs_[id(i)], now));
      state_->next_deadline();
    }
    if (round_ == before) apply(state_->tick(failed_at + std::chrono::seconds(10)));  // backoff
    if (round_ != before + 1) fail("no new round after the restart");
  }

  // What `cohort status` asks for: the daemon's reply, built and encoded. `limited`: only the
  // nodes it lists are copied out of the state (RunState::nodes(limit)), else every node is
  // (RunState::nodes(), as the daemon's status() does).
  size_t status(bool limited) {
    proto::StatusReply reply{29400, {}};
    proto::StatusRun& run = reply.runs.emplace_back();
    run.run_id = "sim";
    run.phase = "running";
    run.round = state_->round();
    Clock::time_point now = Clock::now();
    std::vector<rdzv::RunState::NodeView> views =
        limited ? state_->nodes(proto::kMaxStatusNodes) : state_->nodes();
    if (limited) run.more_nodes = static_cast<int>(state_->node_count() - views.size());
    for (const auto& view : views) {
      if (static_cast<int>(run.nodes.size()) >= proto::kMaxStatusNodes) {
        ++run.more_nodes;
        continue;
      }
      auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - view.last_seen);
      run.nodes.push_back({view.info.node_id, view.info.address, "member", view.group_rank,
                           view.info.local_world_size, view.succeeded, age.count()});
    }
    return proto::encode_frame(proto::encode_message(reply)).size();
  }

  void complete() {
    std::string payload = proto::encode_message(proto::NodeSucceeded{round_});
    for (int i = 0; i < agents_; ++i) {
      proto::NodeSucceeded succeeded = decode<proto::NodeSucceeded>(payload);
      apply(state_->node_succeeded(id(i), succeeded.round, Clock::now()));
    }
    if (completes_ != agents_) fail("not every agent completed");
  }

  void reset_counts() { bytes_out_ = frames_out_ = 0; }
  uint64_t bytes_out() const { return bytes_out_; }
  uint64_t frames_out() const { return frames_out_; }
  uint64_t events() const { return events_; }
  uint64_t waiting_frames() const { return waiting_frames_; }

 private:
  static std::string id(int i) { return "sim-node-" + std::to_string(i); }

  [[noreturn]] static void fail(const char* why) {
    std::fprintf(stderr, "rdzv_core_bench: %s\n", why);
    std::exit(1);
  }

  template <typename T>
  static T decode(const std::string& payload) {
    std::string error;
    std::optional<proto::ControlMessage> message = proto::decode_message(payload, error);
    if (!message || !std::holds_alternative<T>(*message)) fail("a frame did not decode");
    return std::get<T>(std::move(*message));
  }

  static std::string nlohmann_free_fields(const std::string& node, const std::string& address) {
    return "{\"node\": \"" + node + "\", \"address\": \"" + address + "\"}";
  }

  // The daemon's events: one line into the run's history. Their fields are JSON text here (the
  // daemon builds them with nlohmann::json); the line is stamped and stored as the daemon's is.
  void record(const char* name, const std::string& fields) {
    Event event{"sim", name, nlohmann::json::parse(fields)};
    history_.add("sim", log_.record(event, ++t_ms_));
    ++events_;
  }

  // Every frame the daemon would write: encoded, framed, counted (never written anywhere).
  void send(const proto::ControlMessage& message) {
    bytes_out_ += proto::encode_frame(proto::encode_message(message)).size();
    ++frames_out_;
  }

  void apply(const rdzv::Actions& actions) {
    for (const auto& action : actions) {
      if (auto* waiting = std::get_if<rdzv::WaitingStatus>(&action)) {
        std::optional<int64_t> last_call;
        if (waiting->last_call_in) last_call = waiting->last_call_in->count();
        for (size_t i = 0; i < waiting->node_ids.size(); ++i) {
          send(proto::Waiting{waiting->joined, waiting->min_nodes, waiting->max_nodes, last_call});
          ++waiting_frames_;
        }
      } else if (auto* start = std::get_if<rdzv::StartRound>(&action)) {
        round_ = start->round;
        nlohmann::json members = nlohmann::json::array();
        for (const rdzv::Assignment& member : start->members) {
          members.push_back({{"node", member.node_id},
                             {"address", member.address},
                             {"group_rank", member.group_rank},
                             {"local_world_size", member.local_world_size}});
        }
        Event event{"sim",
                    "round.started",
                    {{"round", start->round},
                     {"world_size", start->members.front().world_size},
                     {"members", std::move(members)}}};
        history_.add("sim", log_.record(event, ++t_ms_));
        ++events_;
        for (const rdzv::Assignment& member : start->members) {
          send(proto::RoundAssigned{member.round, member.group_rank, member.group_world_size,
                                    member.base_rank, member.world_size, "127.0.0.1", 29500,
                                    state_->restarts_used(), state_->config().max_restarts});
        }
      } else if (auto* restart = std::get_if<rdzv::RestartMembers>(&action)) {
        record("restart.decided", "{\"round\": " + std::to_string(round_) + "}");
        for (size_t i = 0; i < restart->node_ids.size(); ++i) send(proto::Restart{restart->reason});
        restarts_sent_ += static_cast<int>(restart->node_ids.size());
      } else if (auto* complete = std::get_if<rdzv::CompleteRun>(&action)) {
        record("run.completed", "{}");
        for (size_t i = 0; i < complete->node_ids.size(); ++i) send(proto::Complete{});
        completes_ += static_cast<int>(complete->node_ids.size());
      } else if (std::holds_alternative<rdzv::StopRun>(action) ||
                 std::holds_alternative<rdzv::DropNode>(action)) {
        fail("a node was stopped or dropped");
      }
    }
  }

  int agents_;
  int local_world_size_;
  bool scaled_refresh_;  ///< rdzv::waiting_refresh_interval, else the daemon's fixed 500 ms
  std::vector<std::string> hellos_;
  std::string heartbeat_, join_;
  std::unique_ptr<rdzv::RunState> state_;
  std::map<std::string, rdzv::NodeInfo> nodes_;     // the daemon's, by node id
  std::map<std::string, rdzv::RunConfig> configs_;  // the daemon's, by node id
  EventLog log_{"daemon"};
  EventHistory history_;
  int64_t t_ms_ = 0;
  int round_ = -1;
  int restarts_sent_ = 0;
  int completes_ = 0;
  uint64_t bytes_out_ = 0, frames_out_ = 0, events_ = 0, waiting_frames_ = 0;
};

int run(int argc, char** argv) {
  int agents = 1000, heartbeats = 5, local_world_size = 8, status_queries = 5;
  bool scaled_refresh = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    int value = std::atoi(argv[i + 1]);
    if (flag == "--agents") {
      agents = value;
    } else if (flag == "--heartbeats") {
      heartbeats = value;
    } else if (flag == "--local-world-size") {
      local_world_size = value;
    } else if (flag == "--status-queries") {
      status_queries = value;
    } else if (flag == "--scaled-refresh") {
      scaled_refresh = value == 1;
    } else {
      agents = -1;
    }
  }
  if (agents < 1 || agents > proto::kMaxNodes || heartbeats < 1 || status_queries < 1 ||
      argc % 2 == 0) {
    std::fputs(
        "rdzv_core_bench [--agents N (at most 100000)] [--heartbeats 5] [--status-queries 5]\n"
        "                [--local-world-size 8] [--scaled-refresh 0|1]\n",
        stderr);
    return 2;
  }
  Core core(agents, local_world_size, scaled_refresh);
  core.prepare();
  EventHistory warm;  // the allocator's first pages, before RSS is read
  long rss_before = status_kib("VmRSS");

  Span form;
  core.form();
  double form_ms = form.wall_ms(), form_cpu_ms = form.cpu_ms();
  long rss_round = status_kib("VmRSS");
  uint64_t form_bytes = core.bytes_out(), form_frames = core.frames_out();
  uint64_t form_waiting = core.waiting_frames();

  core.reset_counts();
  Span beat;
  core.heartbeats(heartbeats);
  double beat_cpu_ms = beat.cpu_ms(), beat_ms = beat.wall_ms();
  uint64_t beat_bytes = core.bytes_out();

  std::vector<double> status_ms, limited_ms;
  size_t status_bytes = 0;
  for (int q = 0; q < status_queries; ++q) {
    Span one;
    status_bytes = core.status(false);
    status_ms.push_back(one.cpu_ms());
    Span limited;
    core.status(true);
    limited_ms.push_back(limited.cpu_ms());
  }
  std::sort(status_ms.begin(), status_ms.end());
  std::sort(limited_ms.begin(), limited_ms.end());

  core.reset_counts();
  Span restart;
  core.restart();
  double restart_ms = restart.wall_ms(), restart_cpu_ms = restart.cpu_ms();
  uint64_t restart_bytes = core.bytes_out();

  core.reset_counts();
  Span complete;
  core.complete();
  double complete_cpu_ms = complete.cpu_ms();

  double total_heartbeats = static_cast<double>(agents) * heartbeats;
  std::printf(
      "{\"agents\": %d, \"form_ms\": %.3f, \"form_cpu_ms\": %.3f, \"form_frames\": %llu, "
      "\"form_bytes\": %llu, \"waiting_frames\": %llu, \"rss_before_kib\": %ld, "
      "\"rss_round_kib\": %ld, \"rss_delta_kib\": %ld, \"heartbeats\": %.0f, "
      "\"heartbeat_ns\": %.1f, \"heartbeat_cpu_ns\": %.1f, \"heartbeat_bytes_out\": %.1f, "
      "\"status_cpu_ms_median\": %.3f, \"status_limited_cpu_ms_median\": %.3f, "
      "\"status_reply_bytes\": %zu, \"scaled_refresh\": %s, \"restart_ms\": %.3f, "
      "\"restart_cpu_ms\": %.3f, \"restart_bytes\": %llu, \"complete_cpu_ms\": %.3f, "
      "\"events\": %llu, \"vm_hwm_kib\": %ld}\n",
      agents, form_ms, form_cpu_ms, static_cast<unsigned long long>(form_frames),
      static_cast<unsigned long long>(form_bytes), static_cast<unsigned long long>(form_waiting),
      rss_before, rss_round, rss_round - rss_before, total_heartbeats,
      beat_ms * 1e6 / total_heartbeats, beat_cpu_ms * 1e6 / total_heartbeats,
      static_cast<double>(beat_bytes) / total_heartbeats, status_ms[status_ms.size() / 2],
      limited_ms[limited_ms.size() / 2], status_bytes, scaled_refresh ? "true" : "false",
      restart_ms, restart_cpu_ms, static_cast<unsigned long long>(restart_bytes), complete_cpu_ms,
      static_cast<unsigned long long>(core.events()), status_kib("VmHWM"));
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) { return cohort::run(argc, argv); }
