#include "rendezvous/client.hpp"

#include <boost/asio/connect.hpp>

#include "common/text.hpp"

namespace cohort {

RendezvousClient::RendezvousClient(boost::asio::io_context& io, ClientOptions options,
                                   MessageHandler on_message, LostHandler on_lost)
    : io_(io),
      options_(std::move(options)),
      on_message_(std::move(on_message)),
      on_lost_(std::move(on_lost)),
      resolver_(io),
      socket_(io),
      retry_timer_(io),
      heartbeat_timer_(io) {}

RendezvousClient::~RendezvousClient() {
  *alive_ = false;
  close();
}

void RendezvousClient::connect(proto::Hello hello) {
  hello_ = std::move(hello);
  give_up_at_ = std::chrono::steady_clock::now() + options_.connect_deadline;
  try_connect();
}

void RendezvousClient::try_connect() {
  resolver_.async_resolve(
      options_.host, std::to_string(options_.port),
      [this, alive = alive_](const boost::system::error_code& error,
                             boost::asio::ip::tcp::resolver::results_type results) {
        if (!*alive || closed_) return;
        auto retry = [this](const std::string& why) {
          last_error_ = why;
          if (std::chrono::steady_clock::now() + retry_delay_ > give_up_at_) {
            return lost(ConnectionLoss::CannotReach,
                        cat("cannot reach the rendezvous at ", options_.host, ":", options_.port,
                            ": ", last_error_));
          }
          retry_timer_.expires_after(retry_delay_);
          retry_delay_ = std::min(retry_delay_ * 2, std::chrono::milliseconds(1000));
          retry_timer_.async_wait([this, alive = alive_](const boost::system::error_code& e) {
            if (!e && *alive && !closed_) try_connect();
          });
        };
        if (error) return retry(error.message());
        boost::asio::async_connect(
            socket_, results,
            [this, alive, retry](const boost::system::error_code& connect_error,
                                 const boost::asio::ip::tcp::endpoint&) {
              if (!*alive || closed_) return;
              if (connect_error) {
                socket_ = boost::asio::ip::tcp::socket(io_);
                return retry(connect_error.message());
              }
              on_connected();
            });
      });
}

void RendezvousClient::on_connected() {
  retry_delay_ = std::chrono::milliseconds(20);
  session_ = std::make_shared<ControlSession>(
      std::move(socket_),
      [this, alive = alive_](ControlSession&, proto::ControlMessage message) {
        if (!*alive) return;
        last_heard_ = std::chrono::steady_clock::now();
        on_message_(std::move(message));
      },
      [this, alive = alive_](ControlSession&, const std::string& reason) {
        if (*alive && !closed_)
          lost(ConnectionLoss::Closed, "connection to the rendezvous closed: " + reason);
      });
  socket_ = boost::asio::ip::tcp::socket(io_);
  last_heard_ = std::chrono::steady_clock::now();
  session_->start();
  session_->send(hello_);
  arm_heartbeat();
}

void RendezvousClient::arm_heartbeat() {
  heartbeat_timer_.expires_after(options_.heartbeat_interval);
  heartbeat_timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (error || !*alive || closed_ || !connected()) return;
    if (std::chrono::steady_clock::now() - last_heard_ > options_.heartbeat_timeout) {
      return lost(ConnectionLoss::HeartbeatTimeout, "the rendezvous stopped answering heartbeats");
    }
    session_->send(proto::Heartbeat{});
    arm_heartbeat();
  });
}

void RendezvousClient::send(const proto::ControlMessage& message) {
  if (connected()) session_->send(message);
}

void RendezvousClient::close(std::optional<proto::ControlMessage> last) {
  if (closed_) return;
  closed_ = true;
  retry_timer_.cancel();
  heartbeat_timer_.cancel();
  resolver_.cancel();
  boost::system::error_code ignored;
  socket_.close(ignored);
  if (session_) session_->close_after(std::move(last), "agent closed");
}

void RendezvousClient::lost(ConnectionLoss kind, const std::string& reason) {
  if (closed_) return;
  closed_ = true;
  retry_timer_.cancel();
  heartbeat_timer_.cancel();
  if (session_) session_->abandon();
  auto handler = on_lost_;
  if (handler) handler(kind, reason);
}

}  // namespace cohort
