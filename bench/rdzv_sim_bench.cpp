// rdzv_sim_bench: thousands of simulated agents against a running cohortd, from one process and
// one thread. Each agent is one control connection that says hello (fixed --nnodes N, run "sim",
// its own node id and address, local_world_size 8); the bench measures the time from the first
// connect until every connection has its `round`, then every agent reports node_succeeded and
// the bench measures the time until every connection has `complete`. Prints one JSON line.
// Driven by bench/rendezvous_bench.py, which starts cohortd and samples its memory.
// With --hang, agent 0 declares a hang instead: every other agent answers the daemon's
// dump_request at once (no dump wait) with its 8 ranks' flight-recorder records, in which rank 13
// never enqueued all_reduce #4120 that every other rank waits in; agent 0 sends its own and its
// failure report; the bench measures the time from the hang declared until every agent's `stop`
// names rank 13 (driven by bench/hang_attribution_bench.py).
// Between the round and the end, optional phases, each timed (and, with --daemon-pid, the
// daemon's CPU time read from /proc at its edges): --heartbeats K (every agent sends K heartbeats
// at once; until every ack is back), --status-queries K (K status requests one after another, each
// on a fresh connection, while every agent is a member; with --brief-status 1, brief ones, as an
// agent that moved asks whether the run's other nodes are still there), and --restart 1 (the run
// allows one restart; agent 0 reports a worker failure as an agent does, every agent answers the
// daemon's `restart` with `join`; from the failure report until every agent has its next round).
// Driven for these by bench/growth_bench.py.

#include <unistd.h>
#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/fd_limit.hpp"
#include "proto/control_messages.hpp"
#include "rendezvous/control_session.hpp"

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;
namespace ip = boost::asio::ip;

struct SimOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  int agents = 1000;
  int local_world_size = 8;
  int connect_window = 48;    ///< agents connecting or awaiting `welcome` at once (see below)
  int hold_ms = 0;            ///< once every agent has its round, wait this long before succeeding
  bool hang = false;          ///< declare a hang instead of succeeding (see the header)
  bool restart = false;       ///< a worker failure and the restart, before succeeding
  int heartbeats = 0;         ///< heartbeats per agent, once every agent has its round
  int status_queries = 0;     ///< status requests, once every agent has its round
  bool brief_status = false;  ///< those requests are brief, as an agent's probe asks
  int daemon_pid = 0;         ///< read its CPU time and RSS from /proc at each phase's edges
  int timeout_s = 120;
  std::string run_id = "sim";
};

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// The daemon's user + system CPU seconds (/proc/PID/stat); -1 without a pid.
double cpu_seconds(int pid) {
  if (pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // field 3 is the state; 14 utime, 15 stime
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The daemon's resident memory in KiB (VmRSS); -1 without a pid.
long rss_kib(int pid) {
  if (pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// The bytes one message takes on the wire in its frame (TCP/IP headers not counted).
size_t frame_bytes(const proto::ControlMessage& message) {
  return proto::encode_frame(proto::encode_message(message)).size();
}

// The simulated agents: their connections, and the counters and times of the run.
class Simulation {
 public:
  Simulation(boost::asio::io_context& io, SimOptions options)
      : io_(io), options_(std::move(options)), deadline_(io) {
    agents_.resize(static_cast<size_t>(options_.agents));
  }

  void start() {
    endpoint_ = ip::tcp::endpoint(ip::make_address(options_.host), options_.port);
    deadline_.expires_after(std::chrono::seconds(options_.timeout_s));
    deadline_.async_wait([this](const boost::system::error_code& error) {
      if (!error) fail("timed out after " + std::to_string(options_.timeout_s) + " s");
    });
    started_ = Clock::now();
    while (in_flight_ < options_.connect_window && next_ < options_.agents) connect_next();
  }

  bool ok() const { return error_.empty(); }

  void report() const {
    std::string error;
    for (char c : error_) error += (c == '"' || c == '\\') ? '\'' : c;
    std::printf(
        "{\"agents\": %d, \"connect_ms\": %.2f, \"round_ms\": %.2f, \"complete_ms\": %.2f, "
        "\"succeeded_to_complete_ms\": %.2f, \"waiting_messages\": %llu, \"rounds\": %d, "
        "\"completes\": %d, \"ranks\": %d, \"hang_to_verdict_ms\": %.2f, "
        "\"hang_to_every_stop_ms\": %.2f, \"heartbeats\": %llu, \"heartbeats_ms\": %.2f, "
        "\"heartbeat_frame_bytes\": %zu, \"heartbeat_ack_frame_bytes\": %zu, "
        "\"status_queries\": %d, \"status_ms_median\": %.2f, \"status_ms_max\": %.2f, "
        "\"status_reply_bytes\": %zu, \"status_nodes_listed\": %d, \"status_more_nodes\": %d, "
        "\"failure_to_every_restart_ms\": %.2f, \"failure_to_every_round_ms\": %.2f, "
        "\"restarted_round\": %d, \"daemon_cpu_round_s\": %.3f, "
        "\"daemon_cpu_heartbeats_s\": %.3f, \"daemon_cpu_status_s\": %.3f, "
        "\"daemon_cpu_restart_s\": %.3f, \"daemon_cpu_end_s\": %.3f, "
        "\"daemon_rss_round_kib\": %ld, \"error\": \"%s\"}\n",
        options_.agents, connected_all_ms_, round_all_ms_, complete_all_ms_,
        complete_all_ms_ - round_all_ms_, static_cast<unsigned long long>(waiting_messages_),
        rounds_, completes_, options_.agents * options_.local_world_size, first_stop_ms_,
        every_stop_ms_, static_cast<unsigned long long>(acks_), heartbeats_ms_,
        frame_bytes(proto::Heartbeat{}), frame_bytes(proto::HeartbeatAck{}), status_done_,
        median(status_ms_),
        status_ms_.empty() ? -1.0 : *std::max_element(status_ms_.begin(), status_ms_.end()),
        status_bytes_, status_listed_, status_more_, every_restart_ms_, every_second_round_ms_,
        second_round_, cpu_round_s_, cpu_heartbeats_s_, cpu_status_s_, cpu_restart_s_,
        cpu_seconds(options_.daemon_pid), rss_round_kib_, error.c_str());
  }

 private:
  struct Agent {
    std::shared_ptr<ControlSession> session;
    int round = -1;
  };

  // At most connect_window agents are between connect and `welcome`: a connection the kernel
  // completed but the daemon has not accepted yet waits in a finite accept queue, and one that
  // overflows it is reset (as it would be for real agents that all start at the same instant).
  // The daemon takes any number at once from the one address these share: past 64 that have not
  // said hello yet, the rest wait their turn unread (ConnectionGate).
  void connect_next() {
    int index = next_++;
    ++in_flight_;
    auto socket = std::make_shared<ip::tcp::socket>(io_);
    socket->async_connect(endpoint_, [this, index, socket](const boost::system::error_code& error) {
      if (!error_.empty()) return;
      if (error) return fail("connect " + std::to_string(index) + ": " + error.message());
      on_connected(index, std::move(*socket));
    });
  }

  void on_connected(int index, ip::tcp::socket socket) {
    Agent& agent = agents_[static_cast<size_t>(index)];
    agent.session = std::make_shared<ControlSession>(
        std::move(socket),
        [this, index](ControlSession&, proto::ControlMessage message) {
          on_message(index, std::move(message));
        },
        [this, index](ControlSession&, const std::string& reason) {
          if (completes_ < options_.agents) {
            fail("agent " + std::to_string(index) + " lost its connection: " + reason);
          }
        });
    agent.session->start();
    // The hello answers the daemon's challenge (see on_message).
    if (++connected_ == options_.agents) connected_all_ms_ = ms_between(started_, Clock::now());
  }

  proto::Hello make_hello(int index) const {
    proto::Hello hello;
    hello.run_id = options_.run_id;
    hello.node_id = "sim-node-" + std::to_string(index);
    // Distinct addresses 10.x.y.z, one per agent (only advertised, never bound).
    hello.address = "10." + std::to_string((index >> 16) & 255) + "." +
                    std::to_string((index >> 8) & 255) + "." + std::to_string(index & 255);
    hello.local_world_size = options_.local_world_size;
    // Fixed size; no heartbeats needed within the bench (the timeout is far away).
    hello.config = {options_.agents, options_.agents, options_.restart ? 1 : 0, 1000,
                    600000,          600000};
    return hello;
  }

  void on_message(int index, proto::ControlMessage message) {
    if (!error_.empty()) return;
    Agent& agent = agents_[static_cast<size_t>(index)];
    if (std::holds_alternative<proto::Challenge>(message)) {
      agent.session->send(make_hello(index));
    } else if (std::holds_alternative<proto::Waiting>(message)) {
      ++waiting_messages_;
    } else if (auto* assigned = std::get_if<proto::RoundAssigned>(&message)) {
      if (restarting_ && agent.round >= 0 && assigned->round > agent.round) {
        agent.round = assigned->round;
        second_round_ = assigned->round;
        if (++second_rounds_ == options_.agents) {
          every_second_round_ms_ = ms_between(failed_at_, Clock::now());
          cpu_restart_s_ = cpu_seconds(options_.daemon_pid) - cpu_mark_;
          succeed_all();
        }
        return;
      }
      if (agent.round >= 0) return fail("a second round for agent " + std::to_string(index));
      agent.round = assigned->round;
      if (++rounds_ == options_.agents) {
        round_all_ms_ = ms_between(started_, Clock::now());
        cpu_round_s_ = cpu_seconds(options_.daemon_pid);
        rss_round_kib_ = rss_kib(options_.daemon_pid);
        std::fprintf(stderr, "rdzv_sim_bench: every agent has its round\n");
        hold_.expires_after(std::chrono::milliseconds(options_.hold_ms));
        hold_.async_wait([this](const boost::system::error_code& error) {
          if (!error) next_phase();
        });
      }
    } else if (std::holds_alternative<proto::HeartbeatAck>(message)) {
      if (phase_ != Phase::Heartbeats) return fail("an ack without a heartbeat");
      if (++acks_ == static_cast<uint64_t>(options_.agents) * options_.heartbeats) {
        heartbeats_ms_ = ms_between(phase_from_, Clock::now());
        cpu_heartbeats_s_ = cpu_seconds(options_.daemon_pid) - cpu_mark_;
        next_phase();
      }
    } else if (std::holds_alternative<proto::Restart>(message)) {
      if (!restarting_) return fail("agent " + std::to_string(index) + " told to restart");
      if (++restarts_heard_ == options_.agents) {
        every_restart_ms_ = ms_between(failed_at_, Clock::now());
      }
      agent.session->send(proto::Join{0});  // its workers stopped at once
    } else if (std::holds_alternative<proto::Complete>(message)) {
      if (++completes_ == options_.agents) {
        complete_all_ms_ = ms_between(started_, Clock::now()) -
                           ms_between(started_, succeeded_from_) + round_all_ms_;
        finish();
      }
    } else if (auto* request = std::get_if<proto::DumpRequest>(&message)) {
      agent.session->send(records_of(index, request->round));
    } else if (auto* stop = std::get_if<proto::Stop>(&message)) {
      if (!options_.hang) return fail("agent " + std::to_string(index) + " stopped");
      if (stop->reason.find("rank 13 ") == std::string::npos) {
        return fail("the stop does not name rank 13: " + stop->reason);
      }
      double since = ms_between(succeeded_from_, Clock::now());
      if (first_stop_ms_ < 0) first_stop_ms_ = since;
      if (++completes_ == options_.agents) {
        every_stop_ms_ = since;
        finish();
      }
    } else if (auto* refused = std::get_if<proto::Error>(&message)) {
      fail("agent " + std::to_string(index) + " refused: " + refused->message);
    } else if (std::holds_alternative<proto::Welcome>(message)) {
      --in_flight_;
      if (next_ < options_.agents) connect_next();
    } else {
      fail(std::string("agent ") + std::to_string(index) + " got an unexpected " +
           proto::message_type(message));
    }
  }

  enum class Phase { Round, Heartbeats, Status, End };

  // The phases after every agent has its round, in order, each only when asked for.
  void next_phase() {
    cpu_mark_ = cpu_seconds(options_.daemon_pid);
    phase_from_ = Clock::now();
    if (phase_ < Phase::Heartbeats && options_.heartbeats > 0) {
      phase_ = Phase::Heartbeats;
      for (auto& agent : agents_) {
        for (int i = 0; i < options_.heartbeats; ++i) agent.session->send(proto::Heartbeat{});
      }
      return;
    }
    if (phase_ < Phase::Status && options_.status_queries > 0) {
      phase_ = Phase::Status;
      return query_status();
    }
    phase_ = Phase::End;
    if (options_.hang) return declare_hang();
    if (options_.restart) return report_failure();
    succeed_all();
  }

  void succeed_all() {
    succeeded_from_ = Clock::now();
    for (auto& each : agents_) each.session->send(proto::NodeSucceeded{each.round});
  }

  // Agent 0's worker failed (exit code 1): the report an agent sends; the run has a restart left.
  void report_failure() {
    Agent& first = agents_[0];
    proto::WorkerFailed failed;
    failed.round = first.round;
    failed.exit_status = 1;
    failed.description = "exit code 1";
    failed.host = "sim-host-0";
    failed.summary = "rank 0 (local 0) on sim-host-0: exit code 1\n";
    failed.cause = "exit code 1: RuntimeError: simulated";
    restarting_ = true;
    failed_at_ = Clock::now();
    first.session->send(failed);
  }

  // One status request on a fresh connection, as `cohort status` asks (no token here).
  void query_status() {
    auto socket = std::make_shared<ip::tcp::socket>(io_);
    query_from_ = Clock::now();
    socket->async_connect(endpoint_, [this, socket](const boost::system::error_code& error) {
      if (!error_.empty()) return;
      if (error) return fail("status connect: " + error.message());
      int query = status_done_;
      auto session = std::make_shared<ControlSession>(
          std::move(*socket),
          [this](ControlSession& session, proto::ControlMessage message) {
            on_status_message(session, std::move(message));
          },
          [this, query](ControlSession&, const std::string& reason) {
            if (status_done_ <= query) fail("the status connection closed: " + reason);
          });
      status_sessions_.push_back(session);
      session->limit_frames(proto::kMaxStatusFrameBytes);
      session->start();
    });
  }

  void on_status_message(ControlSession& session, proto::ControlMessage message) {
    if (!error_.empty()) return;
    if (std::holds_alternative<proto::Challenge>(message)) {
      session.send(
          proto::StatusRequest{options_.run_id, "", "", options_.brief_status, "probe-bench:1#"});
    } else if (auto* reply = std::get_if<proto::StatusReply>(&message)) {
      status_ms_.push_back(ms_between(query_from_, Clock::now()));
      status_bytes_ = frame_bytes(*reply);
      status_listed_ = status_more_ = 0;
      for (const auto& run : reply->runs) {
        status_listed_ += static_cast<int>(run.nodes.size());
        status_more_ += run.more_nodes;
      }
      ++status_done_;
      session.abandon();
      if (status_done_ < options_.status_queries) return query_status();
      cpu_status_s_ = cpu_seconds(options_.daemon_pid) - cpu_mark_;
      next_phase();
    } else if (auto* refused = std::get_if<proto::Error>(&message)) {
      fail("status refused: " + refused->message);
    }
  }

  static double median(std::vector<double> values) {
    if (values.empty()) return -1;
    std::sort(values.begin(), values.end());
    size_t mid = values.size() / 2;
    return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
  }

  // Agent 0: the hang, its own ranks' records and its failure report, back to back.
  void declare_hang() {
    succeeded_from_ = Clock::now();
    Agent& first = agents_[0];
    first.session->send(proto::HangDeclared{first.round, 0});
    first.session->send(records_of(0, first.round));
    proto::WorkerFailed failed;
    failed.round = first.round;
    failed.exit_status = 134;
    failed.description = "signal 6 (SIGABRT)";
    failed.host = "sim-host-0";
    failed.summary = "hung\n";
    first.session->send(failed);
  }

  // Agent `index`'s ranks in the default group: all through #4119, waiting in all_reduce #4120,
  // except rank 13, whose last was #4119.
  proto::Collectives records_of(int index, int round) const {
    proto::Collectives report{round, "sim-host-" + std::to_string(index), {}};
    for (int local = 0; local < options_.local_world_size; ++local) {
      int rank = index * options_.local_world_size + local;
      proto::RankCollectivesReport entry;
      entry.rank = rank;
      proto::GroupProgress group;
      group.id = "0";
      group.desc = "default_pg";
      group.last_completed = 4119;
      group.last_enqueued = rank == 13 ? 4119 : 4120;
      proto::CollectiveCall last{4119, "all_reduce", {{1048576}}, {"Float"}, "completed"};
      if (rank != 13) {
        last = {4120, "all_reduce", {{1048576}}, {"Float"}, "scheduled"};
        group.first_incomplete = last;
      }
      group.last_call = last;
      entry.collectives.groups = {group};
      report.ranks.push_back(std::move(entry));
    }
    return report;
  }

  void fail(const std::string& why) {
    if (!error_.empty()) return;
    error_ = why;
    finish();
  }

  void finish() {
    deadline_.cancel();
    hold_.cancel();
    for (auto& agent : agents_) {
      if (agent.session) agent.session->abandon();
    }
    for (auto& session : status_sessions_) session->abandon();
    io_.stop();
  }

  boost::asio::io_context& io_;
  SimOptions options_;
  boost::asio::steady_timer deadline_;
  boost::asio::steady_timer hold_{io_};  ///< --hold-ms, between the round and the successes
  Clock::time_point succeeded_from_;
  ip::tcp::endpoint endpoint_;
  std::vector<Agent> agents_;
  Clock::time_point started_;
  int next_ = 0;
  int in_flight_ = 0;
  int connected_ = 0;
  int rounds_ = 0;
  int completes_ = 0;
  uint64_t waiting_messages_ = 0;
  double connected_all_ms_ = -1, round_all_ms_ = -1, complete_all_ms_ = -1;
  double first_stop_ms_ = -1, every_stop_ms_ = -1;  ///< --hang: since the hang was declared
  Phase phase_ = Phase::Round;
  Clock::time_point phase_from_, query_from_, failed_at_;
  double cpu_mark_ = -1;  ///< the daemon's CPU seconds when the phase began
  double cpu_round_s_ = -1, cpu_heartbeats_s_ = -1, cpu_status_s_ = -1, cpu_restart_s_ = -1;
  long rss_round_kib_ = -1;
  uint64_t acks_ = 0;
  double heartbeats_ms_ = -1;
  std::vector<std::shared_ptr<ControlSession>> status_sessions_;
  std::vector<double> status_ms_;
  int status_done_ = 0, status_listed_ = 0, status_more_ = 0;
  size_t status_bytes_ = 0;
  bool restarting_ = false;
  int restarts_heard_ = 0, second_rounds_ = 0, second_round_ = -1;
  double every_restart_ms_ = -1, every_second_round_ms_ = -1;
  std::string error_;
};

int usage() {
  std::fputs(
      "rdzv_sim_bench --port P [--host 127.0.0.1] [--agents N] [--local-world-size 8]\n"
      "               [--connect-window 48] [--timeout-s 120] [--run-id sim] [--hold-ms 0]\n"
      "               [--hang 1 | --restart 1] [--heartbeats K] [--status-queries K]\n"
      "               [--brief-status 1]\n"
      "               [--daemon-pid PID]\n",
      stderr);
  return 2;
}

int run(int argc, char** argv) {
  SimOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return usage();
    std::string value = argv[++i];
    if (flag == "--host") {
      options.host = value;
    } else if (flag == "--port") {
      options.port = static_cast<uint16_t>(std::atoi(value.c_str()));
    } else if (flag == "--agents") {
      options.agents = std::atoi(value.c_str());
    } else if (flag == "--local-world-size") {
      options.local_world_size = std::atoi(value.c_str());
    } else if (flag == "--hold-ms") {
      options.hold_ms = std::atoi(value.c_str());
    } else if (flag == "--connect-window") {
      options.connect_window = std::atoi(value.c_str());
    } else if (flag == "--timeout-s") {
      options.timeout_s = std::atoi(value.c_str());
    } else if (flag == "--hang") {
      options.hang = value == "1";
    } else if (flag == "--restart") {
      options.restart = value == "1";
    } else if (flag == "--heartbeats") {
      options.heartbeats = std::atoi(value.c_str());
    } else if (flag == "--status-queries") {
      options.status_queries = std::atoi(value.c_str());
    } else if (flag == "--brief-status") {
      options.brief_status = value == "1";
    } else if (flag == "--daemon-pid") {
      options.daemon_pid = std::atoi(value.c_str());
    } else if (flag == "--run-id") {
      options.run_id = value;
    } else {
      return usage();
    }
  }
  if (options.port == 0 || options.agents < 1 || options.connect_window < 1) return usage();
  long limit = cohort::raise_fd_limit();
  if (limit < options.agents + 16L) {
    std::fprintf(stderr, "rdzv_sim_bench: the descriptor limit %llu is too low for %d agents\n",
                 static_cast<unsigned long long>(limit), options.agents);
    return 2;
  }
  boost::asio::io_context io(1);
  Simulation simulation(io, options);
  simulation.start();
  io.run();
  simulation.report();
  return simulation.ok() ? 0 : 1;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) { return cohort::run(argc, argv); }
