#include "rendezvous/daemon.hpp"

#include <algorithm>
#include <cstdlib>

#include "common/exit_codes.hpp"
#include "common/fd_limit.hpp"
#include "common/log.hpp"
#include "common/run_id.hpp"
#include "common/text.hpp"
#include "observe/event_text.hpp"
#include "proto/auth.hpp"
#include "rendezvous/daemon_events.hpp"
#include "rendezvous/from_wire.hpp"

namespace cohort {
namespace {

// Who stopped the run from outside, as every node is told: cohort stop's "user@host", "cohort
// launch", or empty for a run that failed on its own.
std::string stopped_by_text(const std::string& stopped_by, const std::string& stopper) {
  if (stopped_by == "launch") return "cohort launch";
  return stopper.empty() ? stopped_by : stopper;
}

constexpr const char* kTokenNeeded =
    "authentication failed: this rendezvous needs a token (--token-file or COHORT_TOKEN)";
constexpr const char* kWrongToken =
    "authentication failed: the proof does not match this rendezvous's token";
// A status request for every run proves the daemon's token only: a run's token, which is right,
// fails there too, and its holder must learn to name the run rather than doubt the token.
constexpr const char* kWrongTokenForAllRuns =
    "authentication failed: the proof does not match this rendezvous's token (a run's token "
    "shows only its run: give --rdzv-id RUN)";

// COHORT_STRAGGLER_WINDOW_MS (for tests): how long a straggler must stay slow before it is named.
rdzv::Ms straggler_window() {
  const char* text = std::getenv("COHORT_STRAGGLER_WINDOW_MS");
  if (text == nullptr || *text == '\0') return rdzv::kStragglerWindow;
  char* end = nullptr;
  long long ms = std::strtoll(text, &end, 10);
  if (*end != '\0' || ms < 0 || ms > proto::kMaxDurationMs) {
    log::warn("COHORT_STRAGGLER_WINDOW_MS: expected milliseconds, got '", text, "': using 60000");
    return rdzv::kStragglerWindow;
  }
  return rdzv::Ms(ms);
}

const char* phase_name(rdzv::RunState::Phase phase) {
  switch (phase) {
    case rdzv::RunState::Phase::Forming:
      return "forming";
    case rdzv::RunState::Phase::Running:
      return "running";
    case rdzv::RunState::Phase::Completed:
      return "completed";
    case rdzv::RunState::Phase::Failed:
      return "failed";
  }
  return "?";
}

const char* role_name(rdzv::RunState::Role role) {
  switch (role) {
    case rdzv::RunState::Role::Pending:
      return "joining";
    case rdzv::RunState::Role::Member:
      return "member";
    case rdzv::RunState::Role::Stopping:
      return "restarting";
    case rdzv::RunState::Role::Waiting:
      return "waiting";
    case rdzv::RunState::Role::Spare:
      return "spare";
    case rdzv::RunState::Role::Excluded:
      return "excluded";
    case rdzv::RunState::Role::Unhealthy:
      return "unhealthy";
  }
  return "?";
}

// Who may use a round's worker store: the address each member's control connection came from,
// and 127.0.0.1 when one came over loopback (its workers reach a loopback master_addr from
// 127.0.0.1 whatever loopback address the agent used).
std::vector<boost::asio::ip::address> store_peers(
    const std::map<std::string, std::shared_ptr<ControlSession>>& sessions,
    const std::vector<rdzv::Assignment>& members) {
  std::vector<boost::asio::ip::address> peers;
  for (const auto& member : members) {
    auto session = sessions.find(member.node_id);
    if (session == sessions.end()) continue;
    boost::system::error_code error;
    auto address = boost::asio::ip::make_address(session->second->remote_address(), error);
    if (error) continue;
    if (address.is_v6() && address.to_v6().is_v4_mapped()) address = address.to_v6().to_v4();
    peers.push_back(address);
    if (address.is_loopback()) peers.push_back(boost::asio::ip::address_v4::loopback());
  }
  return peers;
}

}  // namespace

RendezvousDaemon::RendezvousDaemon(boost::asio::io_context& io, Clock& clock, DaemonOptions options)
    : io_(io),
      clock_(clock),
      options_(std::move(options)),
      store_budget_(std::make_shared<ByteBudget>(options_.store_budget_bytes)),
      dump_budget_(std::make_shared<ByteBudget>(rdzv::kMaxAllGatheredDumpBytes)),
      door_(
          io, clock, options_.connection_limits, options_.hello_timeout,
          [this](boost::asio::ip::tcp::socket socket) { return make_session(std::move(socket)); }),
      timer_(clock.make_timer()),
      started_steady_(clock.now()),
      started_wall_ms_(wall_clock_ms()) {
  // A daemon in an agent serves one job, as torchrun's rendezvous port does: a worker whose
  // init_method names that port (tcp://MASTER_ADDR:--master-port) reaches its round's store.
  if (options_.agent_hosted) {
    door_.share_with_store([this](boost::asio::ip::tcp::socket socket, const std::string& peer) {
      return take_store_client(std::move(socket), peer);
    });
  }
}

RendezvousDaemon::~RendezvousDaemon() { stop(); }

boost::system::error_code RendezvousDaemon::start() {
  // One control connection per agent and one or two store connections per worker, in whichever
  // process hosts the daemon (cohortd, an agent, cohort launch).
  log::info("open-file limit: ", raise_fd_limit());
  failed_listener_ = Listener::Control;
  if (auto error = door_.open(options_.address, options_.port)) return error;
  if (!options_.event_log.empty()) {
    failed_listener_ = Listener::EventLog;
    if (std::string problem = event_log_.open(options_.event_log); !problem.empty()) {
      log::error("--event-log ", problem);
      door_.close();
      return boost::system::errc::make_error_code(boost::system::errc::io_error);
    }
  }
  failed_listener_ = Listener::Http;
  if (auto http_error = open_http()) {
    door_.close();
    return http_error;
  }
  door_.start();
  return {};
}

boost::system::error_code RendezvousDaemon::start_http(int port) {
  options_.http_port = port;
  auto error = open_http();
  if (error) options_.http_port = -1;
  return error;
}

boost::system::error_code RendezvousDaemon::open_http() {
  if (options_.http_port < 0) return {};
  observe::HttpOptions http;
  http.address = options_.http_address;
  http.port = static_cast<uint16_t>(options_.http_port);
  http.token = options_.token;  // on loopback too: other users of this host are strangers
  DaemonView view{[this] { return status(); }, [this] { return metrics_snapshot(); },
                  [this](const std::string& run) {
                    std::vector<nlohmann::json> events;
                    for (const std::string& line : history_.lines(run)) {
                      events.push_back(nlohmann::json::parse(line, nullptr, false));
                    }
                    return events;
                  },
                  [this] { return event_ms(); }, [this] { return history_.ended_runs(); }};
  auto pages = std::make_shared<DaemonPages>(std::move(view), metrics_);
  http_ = std::make_unique<observe::HttpServer>(
      io_, http, [pages](const std::string& target) { return pages->answer(target); });
  if (auto failed = http_->start()) {
    http_.reset();
    return failed;
  }
  return {};
}

MetricsSnapshot RendezvousDaemon::metrics_snapshot() const {
  MetricsSnapshot snapshot;
  snapshot.control_connections = door_.connections();
  snapshot.control_connections_accepted = door_.accepted();
  snapshot.store_budget_bytes = store_budget_->limit();
  snapshot.store_budget_used_bytes = store_budget_->used();
  snapshot.moved_runs = moved_.runs();
  for (const auto& [id, run] : runs_) {
    const rdzv::RunState& state = *run.state;
    snapshot.runs.push_back(
        {id, phase_name(state.phase()), state.round(), state.restarts_used(),
         state.config().max_restarts, run.store ? run.store->connection_count() : 0,
         run.store ? run.store->operations() : 0, state.resumed_after(), state.moved_from()});
    for (const auto& view : state.nodes()) {
      double age = std::chrono::duration<double>(now() - view.last_seen).count();
      snapshot.nodes.push_back({id, view.info.node_id, role_name(view.role), age});
    }
  }
  return snapshot;
}

void RendezvousDaemon::stop() {
  if (stopped_) return;
  stopped_ = true;
  door_.close();
  if (http_) http_->stop();
  timer_->cancel();
  for (const auto& session : sessions_) {
    session->hello_deadline.reset();  // their callbacks must not outlive the daemon
    session->reply_deadline.reset();
    session->abandon();
  }
  sessions_.clear();
  runs_.clear();
}

// A connection the door let in: what it says comes here.
std::shared_ptr<ControlSession> RendezvousDaemon::make_session(
    boost::asio::ip::tcp::socket socket) {
  auto session = std::make_shared<ControlSession>(
      std::move(socket),
      [this](ControlSession& from, proto::ControlMessage message) {
        on_message(from, std::move(message));
      },
      [this](ControlSession& from, const std::string& reason) { on_closed(from, reason); });
  session->set_close_grace(options_.reply_read_timeout);  // its last words read, or reset
  sessions_.insert(session);
  return session;
}

void RendezvousDaemon::on_message(ControlSession& session, proto::ControlMessage message) {
  if (auto* hello = std::get_if<proto::Hello>(&message)) return on_hello(session, *hello);
  if (auto* request = std::get_if<proto::StatusRequest>(&message)) {
    return on_status(session, *request);
  }
  if (auto* request = std::get_if<proto::EventsRequest>(&message)) {
    return on_events(session, *request);
  }
  if (auto* request = std::get_if<proto::StopRunRequest>(&message)) {
    return on_stop_run(session, *request);
  }
  Run* run = member_run(session);
  if (run == nullptr) {
    return session.close_after(proto::Error{"the first message must be hello"}, "no hello");
  }
  run->state->heartbeat(session.node_id, now());
  std::visit([&](const auto& typed) { on_member(*run, session, typed); }, message);
  reap_runs();
  schedule();
}

// The run of the session's node, once its hello made it a node of the run (unhealthy ones too).
RendezvousDaemon::Run* RendezvousDaemon::member_run(const ControlSession& session) {
  auto found = runs_.find(session.run_id);
  if (session.node_id.empty() || found == runs_.end()) return nullptr;
  Run& run = found->second;
  return run.state->has_node(session.node_id) ? &run : nullptr;
}

template <typename Message>
void RendezvousDaemon::on_member(Run&, ControlSession& session, const Message& message) {
  session.close_after(proto::Error{std::string("unexpected message ") +
                                   proto::message_type(proto::ControlMessage(message))},
                      "protocol error");
}

void RendezvousDaemon::on_member(Run&, ControlSession& session, const proto::Heartbeat&) {
  session.send(proto::HeartbeatAck{});
}

void RendezvousDaemon::on_member(Run& run, ControlSession& session, const proto::Join& join) {
  const std::string& node = session.node_id;
  if (join.rank0_port > 0) run.rank0_ports[node] = join.rank0_port;
  if (run.unhealthy.erase(node) > 0) record(session.run_id, "node.healthy", {{"node", node}});
  apply(run, run.state->join(nodes_[node], configs_[node], now()));
}

void RendezvousDaemon::on_member(Run& run, ControlSession& session,
                                 const proto::Unhealthy& unhealthy) {
  park_unhealthy(run, session.node_id, unhealthy.reason);
}

void RendezvousDaemon::on_member(Run& run, ControlSession& session,
                                 const proto::WorkerFailed& failed) {
  on_worker_failed(run, session.node_id, failed);
}

void RendezvousDaemon::on_member(Run& run, ControlSession& session,
                                 const proto::HangDeclared& hang) {
  on_hang_declared(run, session.node_id, hang);
}

void RendezvousDaemon::on_member(Run& run, ControlSession& session,
                                 const proto::Collectives& collectives) {
  if (!collectives.host.empty()) run.hosts[session.node_id] = collectives.host;
  run.dumps.reported(session.node_id, collectives);
  if (run.dumps.active() && run.dumps.complete()) finish_dumps(run);
}

void RendezvousDaemon::on_member(Run& run, ControlSession& session,
                                 const proto::Progress& progress) {
  const std::string& node = session.node_id;
  if (!progress.host.empty()) run.hosts[node] = progress.host;
  if (progress.hang) record(session.run_id, "hang.detected", rdzv::hang_fields(node, progress));
  apply(run, run.state->progress(node, rdzv::from_wire(progress), now()));
}

void RendezvousDaemon::on_member(Run& run, ControlSession& session,
                                 const proto::NodeSucceeded& succeeded) {
  apply(run, run.state->node_succeeded(session.node_id, succeeded.round, now()));
}

// Lost with its own reason first; then its close is no second loss (and cannot end the run under
// our feet: closing with nothing to send reports the close at once).
void RendezvousDaemon::on_member(Run& run, ControlSession& session, const proto::Leave& leave) {
  std::string left = session.node_id;
  run.sessions.erase(left);
  run.rank0_ports.erase(left);
  run.unhealthy.erase(left);  // a parked node that leaves is forgotten with the rest
  nodes_.erase(left);
  configs_.erase(left);
  session.node_id.clear();
  std::string reason = leave.reason.empty() ? "left" : leave.reason;
  record(session.run_id, "node.left", {{"node", left}, {"reason", reason}});
  apply(run, run.state->node_lost(left, reason, now()));
  run.hosts.erase(left);
  // The run's last node here left for where the run is now: this daemon says so once it is gone.
  if (run.state->empty() && !leave.moved_to.empty()) moved_.moved(session.run_id, leave.moved_to);
  session.close_after(std::nullopt, "left");
}

void RendezvousDaemon::on_hello(ControlSession& session, const proto::Hello& hello) {
  if (hello.magic != proto::kControlMagic || hello.version != proto::kControlVersion) {
    return session.close_after(
        proto::Error{"protocol mismatch: expected " + std::string(proto::kControlMagic) +
                     " version " + std::to_string(proto::kControlVersion)},
        "bad hello");
  }
  std::optional<std::string> key = proven_key(session, hello);
  if (!key) {
    log::warn("rendezvous: ", session.remote_address(), " failed to authenticate for run ",
              one_line(hello.run_id));
    return session.close_after(proto::Error{hello.proof.empty() ? kTokenNeeded : kWrongToken},
                               "authentication failed");
  }
  if (!session.node_id.empty() || hello.node_id.empty() || hello.node_id.size() > 1024 ||
      nodes_.count(hello.node_id) > 0 || hello.local_world_size < 1) {
    return session.close_after(proto::Error{"bad hello: node id or size"}, "bad hello");
  }
  if (std::string problem = hello_problem(hello); !problem.empty()) {
    return session.close_after(proto::Error{"bad hello: " + problem}, "bad hello");
  }
  proto::Welcome welcome{
      proto::kControlVersion,
      key->empty() ? "" : proto::welcome_proof(*key, session.challenge, hello.client_nonce),
      options_.agent_hosted};
  if (cancelled_) {
    session.send(welcome);
    return session.close_after(*cancelled_, "the runs were cancelled");
  }
  if (auto ending = ended_.late_join(hello.run_id, agent_started(hello)); !ending.empty()) {
    log::info("rendezvous: node ", one_line(hello.address), " of run ", hello.run_id,
              " was started before the run ended and joined only after it: told how it ended");
    session.send(welcome);
    for (size_t i = 0; i + 1 < ending.size(); ++i) session.send(ending[i]);
    return session.close_after(ending.back(), "the run had ended");
  }
  rdzv::RunConfig config = rdzv::from_wire(hello.config);
  auto [found, created] = runs_.try_emplace(hello.run_id, dump_budget_);
  Run& run = found->second;
  moved_.forget(hello.run_id);  // a node here again: the run has not (or no longer) moved away
  if (created) {
    run.state = std::make_unique<rdzv::RunState>(hello.run_id, config, now());
    run.state->set_straggler_window(straggler_window());
    log::info("rendezvous: run ", hello.run_id, " opened by ", one_line(hello.address),
              " nnodes=", config.min_nodes, ":", config.max_nodes);
    history_.run_created(hello.run_id);
    record(hello.run_id, "run.created",
           {{"min_nodes", config.min_nodes},
            {"max_nodes", config.max_nodes},
            {"max_restarts", config.max_restarts}});
  }
  rdzv::NodeInfo info{hello.node_id,
                      hello.address,
                      hello.local_world_size,
                      hello.rank_hint,
                      hello.last_round,
                      hello.last_round_nodes,
                      hello.restarts_used,
                      rdzv::from_wire(hello.outcome),
                      hello.last_round_host_lost,
                      hello.last_round_at};
  door_.proven(session);
  session.run_id = hello.run_id;
  session.node_id = hello.node_id;
  nodes_[hello.node_id] = info;
  configs_[hello.node_id] = config;
  run.sessions[hello.node_id] = session.shared_from_this();
  if (hello.rank0_port > 0) run.rank0_ports[hello.node_id] = hello.rank0_port;
  if (hello.hosts_rendezvous && options_.agent_hosted) run.host_node = hello.node_id;
  session.send(welcome);
  record(hello.run_id, "node.joined",
         {{"node", hello.node_id},
          {"address", hello.address},
          {"local_world_size", hello.local_world_size}});
  if (!hello.unhealthy.empty()) {
    park_unhealthy(run, hello.node_id, hello.unhealthy);
  } else {
    apply(run, run.state->join(info, config, now()));
  }
  reap_runs();
  schedule();
}

// When the hello's agent started, in this daemon's clock; nullopt when it did not say.
std::optional<rdzv::TimePoint> RendezvousDaemon::agent_started(const proto::Hello& hello) const {
  if (hello.age_ms < 0) return std::nullopt;
  return now() - rdzv::Ms(hello.age_ms);
}

// What the launcher checks before it joins, checked again for a client that did not: a run id
// that is one plain name, and a heartbeat timeout the daemon's timer can keep up with.
std::string RendezvousDaemon::hello_problem(const proto::Hello& hello) {
  if (std::string problem = run_id_problem(hello.run_id); !problem.empty()) {
    return "run id: " + problem;
  }
  if (hello.config.heartbeat_timeout_ms < kMinHeartbeatTimeoutMs) {
    return cat("heartbeat_timeout ", hello.config.heartbeat_timeout_ms, " ms is below ",
               kMinHeartbeatTimeoutMs, " ms");
  }
  return {};
}

// The key whose proof the hello carries: the daemon's token, or the run's token derived from it
// (a team that holds only its run's token can act on no other run). "" without a token;
// nullopt when the proof is missing or wrong.
std::optional<std::string> RendezvousDaemon::proven_key(const ControlSession& session,
                                                        const proto::Hello& hello) const {
  if (options_.token.empty()) return std::string();
  for (const std::string& key :
       {options_.token, proto::derive_run_token(options_.token, hello.run_id)}) {
    std::string expected =
        proto::hello_proof(key, session.challenge, hello.client_nonce, hello.run_id, hello.node_id);
    if (proto::proofs_equal(hello.proof, expected)) return key;
  }
  return std::nullopt;
}

// The key a request's proof holds under: the daemon's token, or, for one run (`run_id` not
// empty), that run's token. "" without a token; nullopt when the proof is missing or wrong.
std::optional<std::string> RendezvousDaemon::request_key(
    const std::string& proof, const std::string& run_id,
    const std::function<std::string(const std::string& key)>& expected) const {
  if (options_.token.empty()) return std::string();
  if (proto::proofs_equal(proof, expected(options_.token))) return options_.token;
  if (run_id.empty()) return std::nullopt;
  std::string run_token = proto::derive_run_token(options_.token, run_id);
  if (proto::proofs_equal(proof, expected(run_token))) return run_token;
  return std::nullopt;
}

// What an answer proves back to a tool that sent its nonce: that this end holds `key` too, and
// said this answer (its proof is set last).
template <typename Answer>
void RendezvousDaemon::prove_answer(const ControlSession& session, const std::string& key,
                                    std::string_view kind, const std::string& client_nonce,
                                    const std::string& run_id, Answer& answer) const {
  if (key.empty() || client_nonce.empty()) return;
  std::string digest = proto::answer_digest(proto::ControlMessage(answer));
  answer.proof = proto::answer_proof(key, kind, session.challenge, client_nonce, run_id, digest);
}

// Every run for the daemon's token; one run (request.run_id) for that run's token too.
void RendezvousDaemon::on_status(ControlSession& session, const proto::StatusRequest& request) {
  if (!request.run_id.empty() && !run_id_problem(request.run_id).empty()) {
    return session.close_after(
        proto::Error{"bad status request: run id: " + run_id_problem(request.run_id)},
        "bad status request");
  }
  std::optional<std::string> key =
      request_key(request.proof, request.run_id, [&](const auto& token) {
        return proto::status_proof(token, session.challenge, request.run_id);
      });
  if (!key) {
    const char* wrong = request.run_id.empty() ? kWrongTokenForAllRuns : kWrongToken;
    return session.close_after(proto::Error{request.proof.empty() ? kTokenNeeded : wrong},
                               "authentication failed");
  }
  door_.proven(session);  // a token holder: not evicted while its answer is sent
  proto::StatusReply reply = request.brief ? brief_status(request.run_id, request.own_node_prefix)
                                           : status(request.run_id);
  prove_answer(session, *key, "status", request.client_nonce, request.run_id, reply);
  answer_query(session, reply, "status sent");
}

// The run's events, the newest that fit one reply.
void RendezvousDaemon::on_events(ControlSession& session, const proto::EventsRequest& request) {
  if (std::string problem = run_id_problem(request.run_id); !problem.empty()) {
    return session.close_after(proto::Error{"bad events request: run id: " + problem},
                               "bad events request");
  }
  std::optional<std::string> key =
      request_key(request.proof, request.run_id, [&](const auto& token) {
        return proto::events_proof(token, session.challenge, request.run_id);
      });
  if (!key) {
    return session.close_after(proto::Error{request.proof.empty() ? kTokenNeeded : kWrongToken},
                               "authentication failed");
  }
  door_.proven(session);  // a token holder: not evicted while its answer is sent
  if (!history_.has_run(request.run_id)) {
    return session.close_after(proto::Error{no_run_text(request.run_id)}, "unknown run");
  }
  const std::deque<std::string>& lines = history_.lines(request.run_id);
  proto::EventsReply reply{request.run_id, {}, 0};
  size_t first = lines.size(), bytes = 0;
  while (first > 0 && bytes + lines[first - 1].size() * 2 < proto::kMaxStatusFrameBytes / 2) {
    bytes += lines[--first].size() * 2;  // escaped inside a JSON string: at most twice as long
  }
  for (size_t i = first; i < lines.size(); ++i) {
    reply.events.push_back(lines[i].substr(0, lines[i].size() - 1));  // without its '\n'
  }
  uint64_t dropped = history_.dropped(request.run_id) + first;
  reply.dropped = static_cast<int>(std::min<uint64_t>(dropped, INT32_MAX));
  prove_answer(session, *key, "events", request.client_nonce, request.run_id, reply);
  answer_query(session, reply, "events sent");
}

// A status or events reply, then the close. A reader that does not read holds its reply for
// reply_read_timeout at most, and all of them max_pending_reply_bytes at most between them.
void RendezvousDaemon::answer_query(ControlSession& session, const proto::ControlMessage& reply,
                                    const std::string& reason) {
  if (pending_reply_bytes_ > options_.max_pending_reply_bytes) {
    return session.close_after(
        proto::Error{cat("busy: ", pending_reply_bytes_ >> 20,
                         " MiB of status and events replies are waiting for their readers; try "
                         "again later")},
        "busy");
  }
  session.close_after(reply, reason);
  if (!session.open()) return;
  session.reply_bytes = session.unsent_bytes();
  pending_reply_bytes_ += session.reply_bytes;
  session.reply_deadline = clock_.make_timer();
  session.reply_deadline->start_after(
      options_.reply_read_timeout,
      [weak = std::weak_ptr<ControlSession>(session.shared_from_this())] {
        if (auto unread = weak.lock()) unread->reset_now("its reply was not read in time");
      });
}

// `cohort stop`: every node hears Stop with exit status 130, recorded as run.stopped.
void RendezvousDaemon::on_stop_run(ControlSession& session, const proto::StopRunRequest& request) {
  if (std::string problem = run_id_problem(request.run_id); !problem.empty()) {
    return session.close_after(proto::Error{"bad stop request: run id: " + problem},
                               "bad stop request");
  }
  std::optional<std::string> key =
      request_key(request.proof, request.run_id, [&](const auto& token) {
        return proto::stop_proof(token, session.challenge, request.run_id, request.reason,
                                 request.by);
      });
  if (!key) {
    return session.close_after(proto::Error{request.proof.empty() ? kTokenNeeded : kWrongToken},
                               "authentication failed");
  }
  door_.proven(session);  // a token holder: not evicted while its answer is sent
  auto found = runs_.find(request.run_id);
  if (found == runs_.end() && ended_.has(request.run_id)) {  // its nodes have gone since
    proto::StopRunReply ended{request.run_id, false, 0, ""};
    prove_answer(session, *key, "stop", request.client_nonce, request.run_id, ended);
    return session.close_after(ended, "stop answered");
  }
  if (found == runs_.end()) {
    return session.close_after(proto::Error{no_run_text(request.run_id)}, "unknown run");
  }
  Run& run = found->second;
  std::string reason = request.reason.empty() ? "stopped by cohort stop" : request.reason;
  log::warn("rendezvous: run ", request.run_id, " stopped from ", session.peer,
            request.by.empty() ? "" : " by " + one_line(request.by), ": ", one_line(reason));
  bool running = run.state->phase() == rdzv::RunState::Phase::Forming ||
                 run.state->phase() == rdzv::RunState::Phase::Running;
  int nodes = static_cast<int>(run.sessions.size());
  if (running) {
    run.stopped_by = "cohort stop";
    run.stopper = request.by;
  }
  proto::StopRunReply answer{request.run_id, running, running ? nodes : 0, ""};
  prove_answer(session, *key, "stop", request.client_nonce, request.run_id, answer);
  session.close_after(answer, "stop answered");
  apply(run, run.state->cancel(kExitStopped, reason));
  reap_runs();
  schedule();
}

void RendezvousDaemon::on_closed(ControlSession& session, const std::string& reason) {
  std::shared_ptr<ControlSession> held = session.shared_from_this();  // alive to the end
  forget_session(session, reason);
  // An agent that stopped while it connected leaves no run, only this connection to end.
  if (on_idle && idle()) on_idle();
}

void RendezvousDaemon::forget_session(ControlSession& session, const std::string& reason) {
  sessions_.erase(session.shared_from_this());
  door_.closed(session);
  pending_reply_bytes_ -= session.reply_bytes;
  session.reply_bytes = 0;
  session.reply_deadline.reset();
  if (session.node_id.empty()) return;
  nodes_.erase(session.node_id);
  configs_.erase(session.node_id);
  auto found = runs_.find(session.run_id);
  if (found == runs_.end()) return;
  Run& run = found->second;
  run.sessions.erase(session.node_id);
  run.rank0_ports.erase(session.node_id);
  bool parked = run.unhealthy.erase(session.node_id) > 0;
  if (run.state->has_node(session.node_id)) {
    log::info("rendezvous: node ", one_line(session.node_id), " of run ", session.run_id,
              " disconnected: ", reason);
    std::string loss = "connection closed (" + reason + ")";
    auto silent = std::chrono::duration_cast<rdzv::Ms>(
        now() - run.state->last_seen(session.node_id).value_or(now()));
    rdzv::RunState::Phase phase = run.state->phase();
    if (parked) {  // in no round: its going is no loss to the run
      record(session.run_id, "node.left", {{"node", session.node_id}, {"reason", reason}});
    } else if (phase == rdzv::RunState::Phase::Completed ||
               phase == rdzv::RunState::Phase::Failed) {
      record(session.run_id, "node.left", {{"node", session.node_id}, {"reason", "run ended"}});
    } else {
      record_loss(run, session.node_id, loss, silent);
    }
    apply(run, run.state->node_lost(session.node_id, loss, now()));
  }
  run.hosts.erase(session.node_id);
  reap_runs();
  schedule();
}

void RendezvousDaemon::apply(Run& run, rdzv::Actions actions) {
  ++applying_;
  for (auto& action : actions) {
    std::visit([&](auto& typed) { carry_out(run, typed); }, action);
  }
  --applying_;
}

void RendezvousDaemon::carry_out(Run& run, const rdzv::WaitingStatus& waiting) {
  send_waiting(run, waiting);
  refresh_waiting_later(run);  // the other waiting nodes' view changed too
}

void RendezvousDaemon::carry_out(Run& run, const rdzv::StartRound& start) {
  start_round(run, start);
}

void RendezvousDaemon::carry_out(Run& run, const rdzv::RestartMembers& restart) {
  log::info("rendezvous: run ", run.state->run_id(), " restarts: ", one_line(restart.reason));
  if (!restart.scale_up) run.last_failure = restart.reason;  // a scale-up is no failure
  const rdzv::RunConfig& config = run.state->config();
  nlohmann::json fields{{"round", run.state->round()},
                        {"reason", restart.reason},
                        {"restarts_used", run.state->restarts_used()},
                        {"restarts_left", config.max_restarts - run.state->restarts_used()},
                        {"backoff_ms", restart.backoff.count()}};
  if (restart.scale_up) fields["scale_up"] = true;
  record(run.state->run_id(), "restart.decided", std::move(fields));
  send_to(run, restart.node_ids, proto::Restart{restart.reason});
}

void RendezvousDaemon::carry_out(Run& run, const rdzv::StopRun& stop_run) {
  log::info("rendezvous: run ", run.state->run_id(),
            run.stopped_by.empty() ? " failed: " : " stopped: ", one_line(stop_run.reason));
  run.last_failure = stop_run.reason;
  if (run.stopped_by.empty()) {
    record(run.state->run_id(), "run.failed",
           {{"reason", stop_run.reason}, {"exit_status", stop_run.exit_status}});
  } else {
    nlohmann::json fields{
        {"reason", stop_run.reason}, {"exit_status", stop_run.exit_status}, {"by", run.stopped_by}};
    if (!run.stopper.empty()) fields["requested_by"] = run.stopper;
    record(run.state->run_id(), "run.stopped", std::move(fields));
  }
  run.store.reset();
  proto::Stop stop{stop_run.exit_status, stop_run.reason, stop_run.summary,
                   stopped_by_text(run.stopped_by, run.stopper)};
  ended_.ended(run.state->run_id(), now(), stop);
  send_to(run, stop_run.node_ids, stop);
}

void RendezvousDaemon::carry_out(Run& run, const rdzv::CompleteRun& complete) {
  log::info("rendezvous: run ", run.state->run_id(), " completed");
  record(run.state->run_id(), "run.completed",
         {{"rounds", run.state->round() + 1}, {"restarts_used", run.state->restarts_used()}});
  run.store.reset();
  ended_.ended(run.state->run_id(), now(), std::nullopt);
  send_to(run, complete.node_ids, proto::Complete{});
}

// Not an ending a late node is told of: the same id may form again (the job started anew).
void RendezvousDaemon::carry_out(Run& run, const rdzv::FormingTimedOut& timed_out) {
  log::info("rendezvous: run ", run.state->run_id(), " failed: ", one_line(timed_out.reason));
  run.last_failure = timed_out.reason;
  record(run.state->run_id(), "run.failed",
         {{"reason", timed_out.reason}, {"exit_status", kExitRendezvous}});
}

void RendezvousDaemon::carry_out(Run& run, const rdzv::DropNode& dropped) {
  if (dropped.lost) {
    record_loss(run, dropped.node_id, dropped.reason, dropped.silent);
  }
  drop(run, dropped.node_id, dropped.reason, dropped.lost);
}

void RendezvousDaemon::carry_out(Run& run, const rdzv::Announce& announce) {
  log::warn("rendezvous: run ", run.state->run_id(), ": ", one_line(announce.text));
  record(run.state->run_id(), "straggler", {{"node", announce.node_id}, {"text", announce.text}});
}

void RendezvousDaemon::carry_out(Run& run, const rdzv::HostExcluded& excluded) {
  log::warn("rendezvous: run ", run.state->run_id(), ": ", one_line(excluded.text));
  record(run.state->run_id(), "host.excluded",
         {{"host", excluded.host},
          {"failures", excluded.failures},
          {"cooldown_ms", excluded.cooldown.count()}});
  send_to(run, excluded.node_ids, proto::Notice{excluded.text});
}

void RendezvousDaemon::send_waiting(Run& run, const rdzv::WaitingStatus& status) {
  std::optional<int64_t> last_call;
  if (status.last_call_in) last_call = status.last_call_in->count();
  send_to(run, status.node_ids,
          proto::Waiting{status.joined, status.min_nodes, status.max_nodes, last_call});
}

// Brings every waiting node of the run up to date once kWaitingRefresh has passed (longer in a
// large run, see waiting_refresh_interval): one message per node for any number of joins in
// between (one per join would be n^2 for n joining nodes).
void RendezvousDaemon::refresh_waiting_later(Run& run) {
  if (run.refresh_armed) return;
  if (!run.waiting_refresh) run.waiting_refresh = clock_.make_timer();
  run.refresh_armed = true;
  auto period = std::max(kWaitingRefresh, rdzv::waiting_refresh_interval(run.state->node_count()));
  run.waiting_refresh->start_after(period, [this, &run] {
    run.refresh_armed = false;  // the timer lives in `run`: it cannot fire once the run is gone
    // Nor may the run go while it runs: a send that closes a session (its outbox full) leaves
    // the reaping to the next event, as inside apply().
    ++applying_;
    for (const auto& action : run.state->waiting_status(now())) {
      if (auto* status = std::get_if<rdzv::WaitingStatus>(&action)) send_waiting(run, *status);
    }
    --applying_;
  });
}

void RendezvousDaemon::start_round(Run& run, const rdzv::StartRound& start) {
  const rdzv::Assignment& first = start.members.front();
  auto rank0_port = run.rank0_ports.find(first.node_id);
  std::string classic_addr;
  int classic_port = 0;
  if (rank0_port != run.rank0_ports.end()) {  // classic mode: worker rank 0 binds the port
    classic_addr = first.address;
    classic_port = rank0_port->second;
    run.store.reset();
  } else {
    run.store.reset();  // the old round's store: its keys must never be seen again
    StoreServerOptions store_options;
    store_options.address = options_.address;
    store_options.limits.quota_bytes = options_.store_quota_bytes;
    store_options.budget = store_budget_;
    store_options.allowed_peers = store_peers(run.sessions, start.members);
    store_options.io_pool = options_.store_pool;
    for (uint32_t port = options_.store_port_min;; ++port) {
      store_options.port = static_cast<uint16_t>(port);
      run.store = std::make_unique<StoreServer>(io_, store_options);
      if (!run.store->start()) break;
      run.store.reset();
      if (port >= options_.store_port_max) break;
    }
    if (!run.store) {
      log::error("rendezvous: no free worker store port for run ", run.state->run_id());
    }
  }
  log::info("rendezvous: run ", run.state->run_id(), " round ", start.round, " formed with ",
            start.members.size(), " nodes, world size ", first.world_size);
  run.round_members = start.members;
  run.dumps.reset();  // a new round: the last one's dumps are no longer wanted
  if (run.dumps_deadline) run.dumps_deadline->cancel();
  record_round(run, start);
  bool host_member =
      std::any_of(start.members.begin(), start.members.end(),
                  [&](const rdzv::Assignment& m) { return m.node_id == run.host_node; });
  for (const auto& member : start.members) {
    auto session = run.sessions.find(member.node_id);
    if (session == run.sessions.end()) continue;
    proto::RoundAssigned assigned{
        member.round,     member.group_rank,          member.group_world_size,
        member.base_rank, member.world_size,          classic_addr,
        classic_port,     run.state->restarts_used(), run.state->config().max_restarts,
        host_member};
    if (classic_port == 0) {
      assigned.master_addr = session->second->local_address();
      assigned.master_port = run.store ? run.store->port() : 0;
    }
    session->second->send(assigned);
  }
}

// A TCPStore client at the control port: the store of the one run whose round has one here.
bool RendezvousDaemon::take_store_client(boost::asio::ip::tcp::socket socket,
                                         const std::string& peer) {
  StoreServer* store = nullptr;
  for (auto& [id, run] : runs_) {
    if (!run.store) continue;
    if (store != nullptr) return false;  // several runs: which one is not for us to guess
    store = run.store.get();
  }
  if (store == nullptr) return false;
  log::debug("rendezvous: a TCPStore client at ", peer,
             " on the rendezvous port goes to the store");
  store->adopt(std::move(socket));
  return true;
}

void RendezvousDaemon::send_to(Run& run, const std::vector<std::string>& node_ids,
                               const proto::ControlMessage& message) {
  for (const auto& id : node_ids) {
    auto session = run.sessions.find(id);
    if (session != run.sessions.end()) session->second->send(message);
  }
}

void RendezvousDaemon::drop(Run& run, const std::string& node_id, const std::string& reason,
                            bool lost) {
  run.unhealthy.erase(node_id);
  auto found = run.sessions.find(node_id);
  if (found == run.sessions.end()) return;
  std::shared_ptr<ControlSession> session = found->second;
  run.sessions.erase(found);
  session->node_id.clear();  // its close must not count as another loss
  nodes_.erase(node_id);
  configs_.erase(node_id);
  run.rank0_ports.erase(node_id);
  run.hosts.erase(node_id);  // its loss was recorded: no event names it any more
  if (lost) log::warn("rendezvous: node ", one_line(node_id), " lost: ", one_line(reason));
  session->close_after(proto::Error{reason, lost}, reason);
}

void RendezvousDaemon::continue_after_pause() {
  rdzv::TimePoint at = now();
  for (auto& [id, run] : runs_) run.state->heard_from_everyone(at);
  schedule();
}

void RendezvousDaemon::cancel_runs(int exit_status, const std::string& reason) {
  cancelled_ = proto::Stop{exit_status, reason, "", stopped_by_text("launch", "")};
  for (auto& [id, run] : runs_) {
    if (run.stopped_by.empty()) run.stopped_by = "launch";
    apply(run, run.state->cancel(exit_status, reason));
  }
  reap_runs();
  schedule();
}

bool RendezvousDaemon::runs_going() const {
  for (const auto& [id, run] : runs_) {
    rdzv::RunState::Phase phase = run.state->phase();
    if (phase == rdzv::RunState::Phase::Forming || phase == rdzv::RunState::Phase::Running) {
      return true;
    }
  }
  return false;
}

void RendezvousDaemon::reap_runs() {
  if (applying_ > 0) return;  // a close reported inside apply(): the caller reaps afterwards
  for (auto it = runs_.begin(); it != runs_.end();) {
    if (it->second.state->empty()) {
      record_abandoned(it->first, it->second);
      history_.run_ended(it->first);
      metrics_.forget_run(it->first);
      it = runs_.erase(it);
      if (on_idle && idle()) on_idle();
    } else {
      ++it;
    }
  }
}

// The run's nodes all went (lost, left, or moved to another endpoint) before it completed, failed
// or was stopped: run.abandoned ends its history, so that its page and /metrics say it ended.
void RendezvousDaemon::record_abandoned(const std::string& id, const Run& run) {
  rdzv::RunState::Phase phase = run.state->phase();
  if (phase != rdzv::RunState::Phase::Forming && phase != rdzv::RunState::Phase::Running) return;
  nlohmann::json fields{{"round", run.state->round()}, {"reason", "its last node left"}};
  auto moved = moved_.runs().find(id);
  if (moved != moved_.runs().end()) {
    fields["reason"] = "its nodes moved to " + moved->second;
    fields["moved_to"] = moved->second;
  }
  log::info("rendezvous: run ", id, " abandoned: ", one_line(fields["reason"].get<std::string>()));
  record(id, "run.abandoned", std::move(fields));
}

void RendezvousDaemon::schedule() {
  std::optional<rdzv::TimePoint> next;
  for (const auto& [id, run] : runs_) {
    auto deadline = run.state->next_deadline();
    if (deadline && (!next || *deadline < *next)) next = deadline;
  }
  if (next == timer_armed_for_) return;  // already waiting for exactly that
  timer_armed_for_ = next;
  timer_->cancel();
  if (!next || stopped_) return;
  timer_->start_at(*next, [this] {
    timer_armed_for_.reset();
    rdzv::TimePoint at = now();
    for (auto& [id, run] : runs_) apply(run, run.state->tick(at));
    reap_runs();
    schedule();
  });
}

// The node's health check failed: out of every round (a member's loss restarts the round without
// it) until it sends `join`, but still the run's node (RunState::park_unhealthy); shown in status
// with the reason, recorded when the reason changes.
void RendezvousDaemon::park_unhealthy(Run& run, const std::string& node_id,
                                      const std::string& reason) {
  std::string& known = run.unhealthy[node_id];
  if (known != reason) {
    log::warn("rendezvous: node ", one_line(node_id), " of run ", run.state->run_id(),
              " is unhealthy: ", one_line(reason));
    record(run.state->run_id(), "node.unhealthy", {{"node", node_id}, {"reason", reason}});
  }
  known = reason;
  // Refused (an ended run, other settings): drop() forgets the reason with the node.
  apply(run, run.state->park_unhealthy(nodes_[node_id], configs_[node_id], reason, now()));
}

int64_t RendezvousDaemon::event_ms() const {
  return started_wall_ms_ +
         std::chrono::duration_cast<std::chrono::milliseconds>(now() - started_steady_).count();
}

// A member declared one of its workers hung: every other member asks its ranks for their
// flight-recorder dumps now, while their workers still run, and the failure report that follows
// waits for them (at most the node's dump timeout, capped at kMaxDumpWait, and kDumpSlack).
void RendezvousDaemon::on_hang_declared(Run& run, const std::string& node_id,
                                        const proto::HangDeclared& hang) {
  rdzv::RunState& state = *run.state;
  if (state.phase() != rdzv::RunState::Phase::Running || hang.round != state.round()) return;
  if (run.dumps.round() == hang.round || run.dumps.verdict(hang.round)) {
    return;  // another node's hang in this round: its dumps were asked already
  }
  const std::vector<rdzv::Assignment>& members = run.round_members;
  if (std::none_of(members.begin(), members.end(),
                   [&](const auto& member) { return member.node_id == node_id; })) {
    return;
  }
  std::map<std::string, rdzv::MemberRanks> ranks;
  std::vector<std::string> others;
  for (const rdzv::Assignment& member : members) {
    std::string host = known_host(state.run_id(), member.node_id);
    ranks[member.node_id] = {member.base_rank, member.local_world_size,
                             host.empty() ? member.address : host};
    if (member.node_id != node_id) others.push_back(member.node_id);
  }
  // A node's timeout is its own flag: the wait it imposes on the run is capped all the same.
  auto wait = std::min(std::chrono::milliseconds(hang.dump_timeout_ms), kMaxDumpWait);
  rdzv::TimePoint deadline = now() + wait + kDumpSlack;
  run.dumps.start(hang.round, std::move(ranks), deadline);
  send_to(run, others, proto::DumpRequest{hang.round});
  if (!run.dumps_deadline) run.dumps_deadline = clock_.make_timer();
  run.dumps_deadline->start_at(deadline, [this, id = state.run_id()] {
    auto found = runs_.find(id);
    if (found == runs_.end() || !found->second.dumps.active()) return;
    finish_dumps(found->second);
    reap_runs();
    schedule();
  });
}

// A failure of the round whose dumps are being gathered waits for the verdict.
void RendezvousDaemon::on_worker_failed(Run& run, const std::string& node_id,
                                        const proto::WorkerFailed& failed) {
  if (!failed.host.empty()) run.hosts[node_id] = failed.host;
  record(run.state->run_id(), "worker.failed", rdzv::worker_failed_fields(node_id, failed));
  if (run.dumps.active() && run.dumps.round() == failed.round) {
    return run.dumps.hold(node_id, rdzv::from_wire(failed));
  }
  apply(run, run.state->worker_failed(node_id, rdzv::from_wire(failed), now(),
                                      run.dumps.verdict(failed.round)));
}

// Every member's dumps are in, or the deadline passed: the verdict, its event, and the failure
// report it held.
void RendezvousDaemon::finish_dumps(Run& run) {
  if (run.dumps_deadline) run.dumps_deadline->cancel();
  std::optional<int> round = run.dumps.round();
  rdzv::HangVerdict verdict = run.dumps.finish();
  record(run.state->run_id(), "hang.attributed",
         rdzv::hang_attributed_fields(round.value_or(-1), verdict));
  log::warn("rendezvous: run ", run.state->run_id(), ": ", one_line(verdict.text));
  if (auto held = run.dumps.take_held()) {
    apply(run, run.state->worker_failed(held->first, held->second, now(), &verdict));
  }
}

// One event: to the log file (if any), the run's history and the metrics. An event about a node
// whose host the run knows carries it.
void RendezvousDaemon::record(const std::string& run, const char* name, nlohmann::json fields) {
  auto node = fields.find("node");
  if (node != fields.end() && node->is_string() && !fields.contains("host")) {
    if (std::string host = known_host(run, node->get<std::string>()); !host.empty())
      fields["host"] = host;
  }
  int64_t t_ms = event_ms();
  Event event{run, name, std::move(fields)};
  history_.add(run, event_log_.record(event, t_ms));
  if (on_event) on_event(event);
  event.fields["event"] = name;
  event.fields["run"] = run;
  event.fields["t_ms"] = t_ms;
  metrics_.on_event(event.fields);
}

std::string RendezvousDaemon::known_host(const std::string& run, const std::string& node) const {
  auto found = runs_.find(run);
  if (found == runs_.end()) return {};
  auto host = found->second.hosts.find(node);
  return host == found->second.hosts.end() ? std::string() : host->second;
}

void RendezvousDaemon::record_round(Run& run, const rdzv::StartRound& start) {
  const rdzv::RunState& state = *run.state;
  nlohmann::json fields = rdzv::round_started_fields(start, run.hosts);
  rdzv::add_resumed_fields(fields, start.round, state.resumed_after(), state.moved_from());
  record(state.run_id(), "round.started", std::move(fields));
}

// A member of the current round is marked so: only its loss restarts the round, and so starts
// the time to recover (a pending node's or a spare's loss restarts nothing).
void RendezvousDaemon::record_loss(Run& run, const std::string& node, const std::string& reason,
                                   rdzv::Ms silent) {
  nlohmann::json fields{{"node", node}, {"reason", reason}, {"silent_ms", silent.count()}};
  const std::vector<rdzv::Assignment>& members = run.round_members;
  if (std::any_of(members.begin(), members.end(),
                  [&](const rdzv::Assignment& member) { return member.node_id == node; })) {
    fields["member"] = true;
  }
  record(run.state->run_id(), "node.lost", std::move(fields));
}

// What a status says of a run besides its nodes and ranks.
proto::StatusRun RendezvousDaemon::run_summary(const std::string& id, const Run& run) const {
  const rdzv::RunState& state = *run.state;
  proto::StatusRun out;
  out.run_id = id;
  out.phase = phase_name(state.phase());
  out.round = state.round();
  out.restarts_used = state.restarts_used();
  out.max_restarts = state.config().max_restarts;
  out.min_nodes = state.config().min_nodes;
  out.max_nodes = state.config().max_nodes;
  out.store_port = run.store ? run.store->port() : 0;
  out.last_failure = run.last_failure;
  out.resumed_after = state.resumed_after();
  out.moved_from = state.moved_from();
  return out;
}

// An agent's question: each run's summary and how many of its nodes are live, in O(nodes) with
// nothing copied, where a full status lists up to kMaxStatusNodes of them (a 300 KB answer at
// 10,000 nodes); so that many agents asking at once after a network heals cost little.
proto::StatusReply RendezvousDaemon::brief_status(const std::string& only_run,
                                                  const std::string& own_node_prefix) const {
  proto::StatusReply status{door_.port(), {}};
  for (const auto& [id, run] : runs_) {
    if (!only_run.empty() && id != only_run) continue;
    proto::StatusRun& out = status.runs.emplace_back(run_summary(id, run));
    out.more_nodes = static_cast<int>(run.state->node_count());
    out.live_nodes = run.state->live_nodes(now(), own_node_prefix);
  }
  status.moved_runs = moved_runs(only_run);
  return status;
}

// The answer to a request about run `run_id`, which this daemon does not have: where it went,
// when its nodes all left for another endpoint.
std::string RendezvousDaemon::no_run_text(const std::string& run_id) const {
  std::string text = "no run '" + run_id + "'";
  auto moved = moved_.runs().find(run_id);
  if (moved == moved_.runs().end()) return text;
  return text + " here: it " + observe::moved_text(moved->second);
}

// The runs that moved away from this daemon (all, or `only_run`), where no run of the id is now.
std::vector<proto::MovedRun> RendezvousDaemon::moved_runs(const std::string& only_run) const {
  std::vector<proto::MovedRun> out;
  for (const auto& [id, to] : moved_.runs()) {
    if (only_run.empty() || id == only_run) out.push_back({id, to});
  }
  return out;
}

proto::StatusReply RendezvousDaemon::status(const std::string& only_run) const {
  proto::StatusReply status{door_.port(), {}};
  int unlisted = options_.status_node_limit;  // what is left to list, all runs together
  auto listed = [&](proto::StatusRun& out) -> proto::StatusNode* {
    if (unlisted <= 0) {
      ++out.more_nodes;
      return nullptr;
    }
    --unlisted;
    return &out.nodes.emplace_back();
  };
  for (const auto& [id, run] : runs_) {
    if (!only_run.empty() && id != only_run) continue;
    const rdzv::RunState& state = *run.state;
    proto::StatusRun& out = status.runs.emplace_back(run_summary(id, run));
    // Only the nodes still to be listed are copied out of the state; the rest are counted.
    std::vector<rdzv::RunState::NodeView> views =
        state.nodes(static_cast<size_t>(std::max(0, unlisted)));
    for (const auto& view : views) {
      auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now() - view.last_seen);
      if (proto::StatusNode* node = listed(out)) {
        *node = {view.info.node_id, view.info.address,          role_name(view.role),
                 view.group_rank,   view.info.local_world_size, view.succeeded,
                 age.count()};
        auto sick = run.unhealthy.find(view.info.node_id);
        if (sick != run.unhealthy.end()) node->reason = sick->second;
      }
    }
    out.more_nodes += static_cast<int>(state.node_count() - views.size());
    const rdzv::RunProgress& progress = state.worker_progress();
    if (auto median = progress.median_step_time()) out.median_step_ms = median->count();
    for (const rdzv::SlowRank& slow : progress.slowest()) {
      out.slowest.push_back({slow.rank, slow.node, slow.step_time.count()});
    }
  }
  status.moved_runs = moved_runs(only_run);
  return status;
}

std::string start_failure_text(RendezvousDaemon::Listener failed, const DaemonOptions& options,
                               const boost::system::error_code& error, const std::string& control) {
  switch (failed) {
    case RendezvousDaemon::Listener::Http:
      return cat("--http-port ", options.http_port, ": cannot listen on ", options.http_address,
                 ":", options.http_port, ": ", error.message());
    case RendezvousDaemon::Listener::EventLog:
      return cat("--event-log ", options.event_log, ": cannot open it: ", error.message());
    case RendezvousDaemon::Listener::Control:
      break;
  }
  return cat(control, " ", options.address, ":", options.port, ": ", error.message());
}

}  // namespace cohort
