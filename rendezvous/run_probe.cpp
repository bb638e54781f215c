#include "rendezvous/run_probe.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include "common/signal_blocking.hpp"
#include "common/text.hpp"
#include "proto/auth.hpp"
#include "proto/control_frame.hpp"
#include "rendezvous/control_session.hpp"

namespace cohort {

int live_nodes_elsewhere(const proto::StatusReply& reply, const RunProbeTarget& target) {
  for (const proto::StatusRun& run : reply.runs) {
    if (run.run_id != target.run_id) continue;
    bool counted = run.phase == "running" || (run.phase == "forming" && !target.running_only);
    if (!counted) return 0;
    if (run.live_nodes >= 0) return run.live_nodes;  // a brief reply counted them
    int live = 0;  // a daemon that predates brief replies listed them
    for (const proto::StatusNode& node : run.nodes) {
      bool ours = !target.own_node_id.empty() && node.node_id.starts_with(target.own_node_id);
      live += !ours && node.heartbeat_age_ms <= target.heartbeat_timeout.count();
    }
    return live;
  }
  return 0;
}

RunProbe::RunProbe(boost::asio::io_context& io, Clock& clock, RunProbeTarget target, Done done)
    : io_(io),
      target_(std::move(target)),
      done_(std::move(done)),
      resolver_(io),
      socket_(io),
      deadline_(clock.make_timer()) {}

RunProbe::~RunProbe() {
  *alive_ = false;
  deadline_->cancel();
  if (session_) session_->abandon();
}

void RunProbe::start() {
  deadline_->start_after(target_.deadline, [this] {
    finish({0, cat("no answer within ", format_duration(target_.deadline)), false});
  });
  SignalsBlocked for_the_resolver_thread;  // asio's resolver thread must not take signals
  resolver_.async_resolve(
      target_.host, std::to_string(target_.port),
      [this, alive = alive_](const boost::system::error_code& error,
                             boost::asio::ip::tcp::resolver::results_type results) {
        if (!*alive || finished_) return;
        if (error) return finish({0, error.message(), false});
        boost::asio::async_connect(socket_, results,
                                   [this, alive](const boost::system::error_code& connect_error,
                                                 const boost::asio::ip::tcp::endpoint&) {
                                     if (!*alive || finished_) return;
                                     if (connect_error) return connect_failed(connect_error);
                                     on_connected();
                                   });
      });
}

void RunProbe::on_connected() {
  session_ = std::make_shared<ControlSession>(
      std::move(socket_),
      [this, alive = alive_](ControlSession&, proto::ControlMessage message) {
        if (*alive && !finished_) on_message(std::move(message));
      },
      [this, alive = alive_](ControlSession&, const std::string& reason) {
        if (*alive && !finished_) finish({0, "the connection closed: " + reason, true});
      });
  session_->limit_frames(proto::kMaxFirstFrameBytes);  // a challenge is small; a status may not be
  session_->start();
  // Said first, as the agent does: an agent's daemon (its port shared with the workers' store)
  // challenges at once for it.
  session_->send_bytes(std::string(proto::kSilentPeerProbe));
}

// The daemon's challenge, then its answer: a status proven under the run's token, or a refusal.
void RunProbe::on_message(proto::ControlMessage message) {
  if (auto* challenge = std::get_if<proto::Challenge>(&message); challenge && challenge_.empty()) {
    challenge_ = challenge->nonce;
    proto::StatusRequest request{target_.run_id, "", "", /*brief=*/true, target_.own_node_id};
    if (!target_.token.empty()) {
      nonce_ = proto::random_nonce();
      request.client_nonce = nonce_;
      request.proof = proto::status_proof(target_.token, challenge_, target_.run_id);
    }
    session_->limit_frames(proto::kMaxStatusFrameBytes);
    return session_->send(request);
  }
  if (auto* reply = std::get_if<proto::StatusReply>(&message); reply && !challenge_.empty()) {
    if (!target_.token.empty() &&
        !proto::proofs_equal(reply->proof,
                             proto::answer_proof(target_.token, "status", challenge_, nonce_,
                                                 target_.run_id, reply->digest))) {
      return finish({0, "the answer does not prove that it holds the run's token", true});
    }
    return finish({live_nodes_elsewhere(*reply, target_), "", true});
  }
  if (auto* error = std::get_if<proto::Error>(&message)) return finish({0, error->message, true});
  finish({0, cat("unexpected \"", proto::message_type(message), "\""), true});
}

// Once: the connection is dropped, and `done` runs from the io loop, after this call's handler,
// so that the owner may destroy the probe in it.
// A refused port is the host's answer (nothing listens there); an unreachable host or network is
// silence, as a cut network gives.
void RunProbe::connect_failed(const boost::system::error_code& error) {
  finish({0, error.message(), error == boost::asio::error::connection_refused});
}

void RunProbe::finish(RunProbeAnswer answer) {
  finished_ = true;
  deadline_->cancel();
  resolver_.cancel();
  boost::system::error_code ignored;
  socket_.close(ignored);
  if (session_) session_->close_now("probed");  // its handlers, maybe running now, stay intact
  boost::asio::post(io_, [done = std::move(done_), answer = std::move(answer), alive = alive_] {
    if (*alive) done(answer);
  });
}

}  // namespace cohort
