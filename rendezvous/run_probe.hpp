// Asks one rendezvous daemon, on a connection of its own, whether it still holds a run that other
// live nodes are in: what an agent that moved to a --rdzv-fallback asks the endpoint it left (a
// node cut off alone goes back once the network heals, instead of waiting out the join timeout at
// a fallback no majority will reach), and what an agent waiting for a round asks the later
// fallbacks (the run went on there without it: its side of a split was the minority). One brief
// status request (challenge, request with the run token's proof, the daemon's proven answer: the
// run's phase and its live nodes counted, none listed), under one deadline. Owned by the agent
// until its answer; io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/clock.hpp"
#include "proto/control_messages.hpp"

namespace cohort {

class ControlSession;

struct RunProbeTarget {
  std::string host;
  uint16_t port = 29400;
  std::string run_id;
  std::string token;        ///< the run's; empty: none
  std::string own_node_id;  ///< this agent's node ids start with it (they are not counted)
  std::chrono::milliseconds heartbeat_timeout{5000};  ///< a node heard since is live
  std::chrono::milliseconds deadline{1000};           ///< for the connect and the answer
  bool running_only = false;  ///< count a run's nodes only while a round runs, not while forming
};

/// The nodes of `target.run_id` in `reply` that are not this agent's and were heard within the
/// heartbeat timeout, when the run is still forming (unless `running_only`) or running (0
/// otherwise): as the daemon counted them in a brief reply, or counted here in the node list of
/// a daemon that predates brief replies.
int live_nodes_elsewhere(const proto::StatusReply& reply, const RunProbeTarget& target);

/// What a probe learnt.
struct RunProbeAnswer {
  int live_nodes = 0;   ///< as live_nodes_elsewhere counts them; 0 when no proven status came
  std::string problem;  ///< why none came
  /// The endpoint's host answered: a status, a refusal, a closed connection or a refused port.
  /// False when it stayed silent: no answer within the deadline, no route, no address.
  bool heard = false;
};

class RunProbe {
 public:
  using Done = std::function<void(const RunProbeAnswer& answer)>;

  RunProbe(boost::asio::io_context& io, Clock& clock, RunProbeTarget target, Done done);
  ~RunProbe();
  RunProbe(const RunProbe&) = delete;
  RunProbe& operator=(const RunProbe&) = delete;

  /// Starts the request; `done` is called once, never from within start().
  void start();

 private:
  void on_connected();
  void on_message(proto::ControlMessage message);
  void connect_failed(const boost::system::error_code& error);
  void finish(RunProbeAnswer answer);

  boost::asio::io_context& io_;
  RunProbeTarget target_;
  Done done_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::ip::tcp::socket socket_;
  std::unique_ptr<Timer> deadline_;
  std::shared_ptr<ControlSession> session_;
  std::string challenge_;
  std::string nonce_;
  bool finished_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cohort
