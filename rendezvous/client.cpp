#include "rendezvous/client.hpp"

#include <boost/asio/connect.hpp>

#include "common/host_port.hpp"
#include "common/log.hpp"
#include "common/signal_blocking.hpp"
#include "common/text.hpp"
#include "proto/auth.hpp"

namespace cohort {
namespace {

constexpr std::chrono::milliseconds kLastAttemptGrace{250};

const char* const kNotTheControlPort =
    "; --rdzv-endpoint must name the control port of cohortd or of the agent hosting the "
    "rendezvous, not a worker store (--tcpstore-port) or another service";

}  // namespace

RendezvousClient::RendezvousClient(boost::asio::io_context& io, Clock& clock, ClientOptions options,
                                   MessageHandler on_message, LostHandler on_lost)
    : io_(io),
      clock_(clock),
      options_(std::move(options)),
      on_message_(std::move(on_message)),
      on_lost_(std::move(on_lost)),
      resolver_(io),
      socket_(io),
      retry_timer_(clock.make_timer()),
      attempt_timer_(clock.make_timer()),
      heartbeat_timer_(clock.make_timer()),
      silence_timer_(clock.make_timer()) {}

RendezvousClient::~RendezvousClient() {
  *alive_ = false;
  close();
}

void RendezvousClient::connect(HelloSource hello) {
  make_hello_ = std::move(hello);
  give_up_at_ = clock_.now() + options_.connect_deadline;
  progress_.emplace(endpoint(), clock_.now(), give_up_at_, options_.at_deadline);
  try_connect();
}

std::string RendezvousClient::endpoint() const {
  return host_port_text(options_.host, options_.port);
}

void RendezvousClient::try_connect() {
  // A host that is gone answers no SYN: the kernel would retry for minutes. The attempt ends at
  // the deadline (its handler then sees operation_aborted and reports the endpoint unreachable).
  // The last try, at the deadline, still gets a moment for its answer.
  // A connection accepted but unanswered at the deadline ends there too (a frozen daemon's
  // kernel still accepts): the deadline bounds the handshake, not only the connect.
  attempt_timer_->start_at(std::max(give_up_at_, clock_.now() + kLastAttemptGrace), [this] {
    if (closed_ || welcomed_) return;
    if (session_) return silent_attempt_failed();
    resolver_.cancel();
    boost::system::error_code ignored;
    socket_.close(ignored);
  });
  // The first resolve starts asio's resolver thread, which asio leaves open to signals.
  SignalsBlocked for_the_resolver_thread;
  resolver_.async_resolve(
      options_.host, std::to_string(options_.port),
      [this, alive = alive_](const boost::system::error_code& error,
                             boost::asio::ip::tcp::resolver::results_type results) {
        if (!*alive || closed_) return;
        if (error == boost::asio::error::operation_aborted)  // the attempt's deadline
          return attempt_failed("no answer to the connection attempt", Attempt::Refused);
        if (error) return attempt_failed(error.message(), Attempt::Unresolvable);
        boost::asio::async_connect(socket_, results,
                                   [this, alive](const boost::system::error_code& connect_error,
                                                 const boost::asio::ip::tcp::endpoint&) {
                                     if (!*alive || closed_) return;
                                     if (connect_error) return connect_failed(connect_error);
                                     on_connected();
                                   });
      });
}

void RendezvousClient::connect_failed(const boost::system::error_code& error) {
  socket_ = boost::asio::ip::tcp::socket(io_);
  if (options_.refused_is_final && error == boost::asio::error::connection_refused) {
    refused_for_good_ = true;
    give_up_at_ = clock_.now();  // no retry: the daemon that was there is gone for good
  }
  attempt_failed(error == boost::asio::error::operation_aborted
                     ? "no answer to the connection attempt"
                     : error.message(),
                 Attempt::Refused);
}

// An attempt that got no welcome (no address, no connection, or a connection closed or silent
// before the welcome): try again with backoff until the deadline, saying so as ConnectProgress
// decides, then report the endpoint unreachable.
void RendezvousClient::attempt_failed(const std::string& why, Attempt attempt) {
  if (session_) session_->abandon();
  session_.reset();
  attempt_timer_->cancel();
  heartbeat_timer_->cancel();
  silence_timer_->cancel();
  SteadyTime now = clock_.now();
  if (now >= give_up_at_) {
    return lost(ConnectionLoss::CannotReach,
                cat("cannot reach the rendezvous at ", endpoint(), ": ", why,
                    attempt == Attempt::NotAnswering ? kNotTheControlPort : ""));
  }
  bool unresolvable = attempt == Attempt::Unresolvable;
  if (auto line = progress_->attempt_failed(now, why, unresolvable)) log::warn(*line);
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up_at_ - now);
  retry_timer_->start_after(std::min(retry_delay_, left), [this] {  // the last try at the deadline
    if (!closed_) try_connect();
  });
  retry_delay_ = std::min(retry_delay_ * 2, std::chrono::milliseconds(1000));
}

// A peer that accepted the connection and has said nothing since. One that ignored the probe
// too is as likely a service on the wrong port, and is named so, unless it is the daemon that
// welcomed this agent before (ClientOptions::refused_is_final), frozen.
void RendezvousClient::silent_attempt_failed() {
  if (probed_ && !options_.refused_is_final) {
    return attempt_failed("it accepted the connection but never answered as a cohort rendezvous",
                          Attempt::NotAnswering);
  }
  auto silent_for =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now() - connected_at_);
  attempt_failed(
      cat("it accepted the connection but sent nothing for ", format_duration(silent_for)),
      Attempt::Silent);
}

void RendezvousClient::on_connected() {
  connected_at_ = clock_.now();
  session_ = std::make_shared<ControlSession>(
      std::move(socket_),
      [this, alive = alive_](ControlSession&, proto::ControlMessage message) {
        if (!*alive) return;
        last_heard_ = clock_.now();
        on_session_message(std::move(message));
      },
      [this, alive = alive_](ControlSession& session, const std::string& reason) {
        if (!*alive || closed_) return;
        if (!welcomed_ && session.peer_broke_protocol()) {
          return not_a_rendezvous(proto::speaks_http(session.first_bytes())
                                      ? "it answers HTTP: is it a daemon's --http-port?"
                                      : reason);
        }
        if (!welcomed_) {
          return attempt_failed(
              "it closed the connection without answering as a cohort rendezvous: " + reason,
              Attempt::NotAnswering);
        }
        lost(ConnectionLoss::Closed, "connection to the rendezvous closed: " + reason);
      });
  socket_ = boost::asio::ip::tcp::socket(io_);
  last_heard_ = clock_.now();
  challenge_.clear();
  welcomed_ = false;
  probed_ = false;
  session_->start();
  // Said first, before the challenge: an HTTP server (the daemon's --http-port) answers it in
  // its own words, which ends the run at once instead of at the join timeout; a daemon skips it,
  // and one whose port is shared with the workers' store (an agent's) challenges at once for it
  // instead of after a second's silence.
  session_->send_bytes(std::string(proto::kSilentPeerProbe));
  arm_heartbeat();
}

// The handshake: challenge -> hello (with our proof and nonce) -> welcome (with the daemon's
// proof). Everything after it, and any error, goes to the agent.
void RendezvousClient::on_session_message(proto::ControlMessage message) {
  if (auto* challenge = std::get_if<proto::Challenge>(&message)) {
    if (!challenge_.empty())
      return lost(ConnectionLoss::Untrusted,
                  "protocol error: a second challenge from the rendezvous");
    return answer_challenge(*challenge);
  }
  if (auto* error = std::get_if<proto::Error>(&message); error && !welcomed_) {
    error->rejoin = false;  // unproven: it may end this agent's attempt, never steer its workers
  }
  if (!welcomed_ && !std::holds_alternative<proto::Error>(message)) {
    auto* welcome = std::get_if<proto::Welcome>(&message);
    if (challenge_.empty() || welcome == nullptr) {
      return lost(ConnectionLoss::Untrusted,
                  cat("protocol error: the rendezvous sent \"", proto::message_type(message),
                      "\" before its welcome"));
    }
    if (!welcome_proven(*welcome)) {
      return lost(ConnectionLoss::Untrusted,
                  cat("the rendezvous at ", options_.host, ":", options_.port,
                      " did not prove that it holds the token"));
    }
    welcomed_ = true;
    attempt_timer_->cancel();
    watch_silence();
    daemon_agent_hosted_ = welcome->agent_hosted;
    retry_delay_ = std::chrono::milliseconds(20);
  }
  on_message_(std::move(message));
}

void RendezvousClient::answer_challenge(const proto::Challenge& challenge) {
  challenge_ = challenge.nonce;
  hello_ = make_hello_();
  hello_.client_nonce = proto::random_nonce();
  if (!options_.token.empty()) {
    hello_.proof = proto::hello_proof(options_.token, challenge_, hello_.client_nonce,
                                      hello_.run_id, hello_.node_id);
  }
  session_->send(hello_);
}

bool RendezvousClient::welcome_proven(const proto::Welcome& welcome) const {
  if (options_.token.empty()) return true;
  return proto::proofs_equal(welcome.proof,
                             proto::welcome_proof(options_.token, challenge_, hello_.client_nonce));
}

// Whatever answers at the endpoint does not speak the control protocol (an sshd, a worker store):
// no retry will change that.
void RendezvousClient::not_a_rendezvous(const std::string& reason) {
  lost(ConnectionLoss::Untrusted,
       cat(endpoint(),
           " is not a cohort rendezvous: the first bytes it sent were not a cohort "
           "frame (",
           reason, ")", kNotTheControlPort));
}

void RendezvousClient::arm_heartbeat() {
  heartbeat_armed_at_ = clock_.now();
  heartbeat_timer_->start_after(options_.heartbeat_interval, [this] {
    if (closed_ || !connected() || lost_to_silence()) return;
    if (clock_.now() - last_heard_ > options_.heartbeat_timeout) {  // and not welcomed
      return silent_attempt_failed();
    }
    if (challenge_.empty()) {
      // The probe went at connect and has had a heartbeat interval to be answered. Nothing else
      // goes before the hello, which answers the challenge: a daemon takes any other first frame
      // as a protocol error and closes the connection.
      probed_ = true;
    } else {
      session_->send(proto::Heartbeat{});
    }
    arm_heartbeat();
  });
}

// Whether the connection is over for silence, reported if so: this agent's own (its timers ran
// that late: stopped or starved, and no heartbeat could go out meanwhile), or the welcomed
// daemon's, past the heartbeat timeout.
bool RendezvousClient::lost_to_silence() {
  auto own_silence = clock_.now() - heartbeat_armed_at_;
  if (own_silence > options_.heartbeat_timeout) {
    lost(
        ConnectionLoss::Stalled,
        cat("this agent did not run for ",
            std::chrono::duration_cast<std::chrono::milliseconds>(own_silence).count(),
            " ms (stopped or starved), past the heartbeat timeout: the rendezvous has dropped it"));
    return true;
  }
  if (welcomed_ && clock_.now() - last_heard_ > options_.heartbeat_timeout) {
    lost(ConnectionLoss::HeartbeatTimeout, "the rendezvous stopped answering heartbeats");
    return true;
  }
  return false;
}

// The daemon's silence is judged when it reaches the heartbeat timeout, not at the next
// heartbeat after that (up to an interval later); heard from meanwhile, the watch moves on.
void RendezvousClient::watch_silence() {
  silence_timer_->start_at(last_heard_ + options_.heartbeat_timeout + std::chrono::milliseconds(1),
                           [this] {
                             if (closed_ || !connected() || lost_to_silence()) return;
                             watch_silence();
                           });
}

void RendezvousClient::continue_after_pause() {
  if (closed_ || !connected()) return;
  last_heard_ = clock_.now();
  if (!challenge_.empty()) session_->send(proto::Heartbeat{});
  arm_heartbeat();
  if (welcomed_) watch_silence();
}

void RendezvousClient::send(const proto::ControlMessage& message) {
  if (connected() && !challenge_.empty()) session_->send(message);
}

void RendezvousClient::close(std::optional<proto::ControlMessage> last) {
  if (closed_) return;
  closed_ = true;
  retry_timer_->cancel();
  attempt_timer_->cancel();
  heartbeat_timer_->cancel();
  silence_timer_->cancel();
  resolver_.cancel();
  boost::system::error_code ignored;
  socket_.close(ignored);
  if (session_) session_->close_after(std::move(last), "agent closed");
}

void RendezvousClient::lost(ConnectionLoss kind, const std::string& reason) {
  if (closed_) return;
  closed_ = true;
  retry_timer_->cancel();
  attempt_timer_->cancel();
  heartbeat_timer_->cancel();
  silence_timer_->cancel();
  if (session_) session_->abandon();
  auto handler = on_lost_;
  if (handler) handler(kind, reason);
}

}  // namespace cohort
