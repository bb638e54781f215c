// The agent's side of the control connection: connects to the daemon (retrying with backoff
// until a deadline), answers the daemon's challenge with its hello (proving it holds the token,
// and checking the daemon's proof in the welcome), heartbeats, and hands every other message
// from the daemon to the agent. A connection that drops, or that stays silent past the heartbeat
// timeout, is reported once as lost. Time and timers come from the Clock it is lent. One per
// connection attempt series; owned by the agent; io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/clock.hpp"
#include "rendezvous/connect_progress.hpp"
#include "rendezvous/connection_loss.hpp"
#include "rendezvous/control_session.hpp"

namespace cohort {

struct ClientOptions {
  std::string host;
  uint16_t port = 29400;
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{5000};
  /// Give up connecting, and on a connection not yet welcomed, after this long.
  std::chrono::milliseconds connect_deadline{60000};
  std::string token;          ///< the run's (or the daemon's) shared secret; empty: none
  DeadlineWords at_deadline;  ///< what the agent does then, for the progress lines
  /// A refused connection ends the attempts at once, reported as CannotReach: the daemon there,
  /// which welcomed this agent before, was hosted by an agent and is gone for good.
  bool refused_is_final = false;
};

class RendezvousClient {
 public:
  using MessageHandler = std::function<void(proto::ControlMessage)>;
  using LostHandler = std::function<void(ConnectionLoss kind, const std::string& reason)>;

  RendezvousClient(boost::asio::io_context& io, Clock& clock, ClientOptions options,
                   MessageHandler on_message, LostHandler on_lost);
  ~RendezvousClient();
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  /// Builds one attempt's hello when the daemon's challenge comes, from what the agent knows
  /// then: an outcome reached while no daemon answered goes with the next attempt.
  using HelloSource = std::function<proto::Hello()>;

  /// Connects (retrying) and sends a fresh hello from `hello` first on each attempt; messages
  /// and losses are reported after.
  void connect(HelloSource hello);
  /// The same hello on every attempt.
  void connect(proto::Hello hello) {
    connect([hello = std::move(hello)] { return hello; });
  }
  /// Sent only once this connection's hello is (before it, the next hello carries the news).
  void send(const proto::ControlMessage& message);
  /// Sends `last` if connected, then closes quietly (no loss is reported).
  /// This process was stopped for a while (Ctrl-Z) and knows it: neither its own silence nor
  /// the daemon's meanwhile counts; a heartbeat goes out now. A daemon that dropped this agent
  /// meanwhile has closed the connection, which ends it as ever.
  void continue_after_pause();
  void close(std::optional<proto::ControlMessage> last = std::nullopt);
  bool connected() const { return session_ && session_->open(); }
  /// The daemon proved itself on this connection (its welcome came).
  bool welcomed() const { return welcomed_; }
  /// The daemon that welcomed this connection said it lives in an agent (Welcome::agent_hosted).
  bool daemon_agent_hosted() const { return daemon_agent_hosted_; }
  /// The attempts ended at a refusal taken as final (ClientOptions::refused_is_final).
  bool refused_for_good() const { return refused_for_good_; }

 private:
  std::string endpoint() const;  ///< "host:port", as given
  void try_connect();
  /// Silent: accepted, and nothing came (a frozen daemon as much as a service on the wrong port).
  enum class Attempt { Unresolvable, Refused, NotAnswering, Silent };
  void connect_failed(const boost::system::error_code& error);
  void attempt_failed(const std::string& why, Attempt attempt);
  void on_connected();
  void silent_attempt_failed();
  void not_a_rendezvous(const std::string& reason);
  void on_session_message(proto::ControlMessage message);
  void answer_challenge(const proto::Challenge& challenge);
  bool welcome_proven(const proto::Welcome& welcome) const;
  void arm_heartbeat();
  bool lost_to_silence();
  void watch_silence();
  void lost(ConnectionLoss kind, const std::string& reason);

  boost::asio::io_context& io_;
  Clock& clock_;
  ClientOptions options_;
  MessageHandler on_message_;
  LostHandler on_lost_;
  HelloSource make_hello_;
  proto::Hello hello_;  ///< the current attempt's, once sent
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::ip::tcp::socket socket_;
  std::unique_ptr<Timer> retry_timer_;
  std::unique_ptr<Timer>
      attempt_timer_;  ///< ends a connection attempt not yet welcomed at the deadline
  std::unique_ptr<Timer> heartbeat_timer_;
  std::unique_ptr<Timer> silence_timer_;  ///< the welcomed daemon's heartbeat timeout
  std::shared_ptr<ControlSession> session_;
  SteadyTime give_up_at_;
  std::optional<ConnectProgress> progress_;
  SteadyTime last_heard_;
  SteadyTime connected_at_;        ///< this attempt's connection
  SteadyTime heartbeat_armed_at_;  ///< a timer that fires much later means this process stalled
  std::chrono::milliseconds retry_delay_{20};
  bool probed_ =
      false;  ///< this connection's peer has had a heartbeat interval to answer the probe
  std::string last_error_;
  std::string challenge_;  ///< this connection's challenge, once the daemon sent it
  bool welcomed_ = false;
  bool daemon_agent_hosted_ = false;
  bool refused_for_good_ = false;
  bool closed_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cohort
