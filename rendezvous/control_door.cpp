#include "rendezvous/control_door.hpp"

#include <boost/asio/ip/v6_only.hpp>

#include "common/log.hpp"
#include "proto/auth.hpp"

namespace cohort {

ControlDoor::ControlDoor(boost::asio::io_context& io, Clock& clock, ConnectionLimits limits,
                         std::chrono::milliseconds hello_timeout, MakeSession make_session)
    : clock_(clock),
      hello_timeout_(hello_timeout),
      make_session_(std::move(make_session)),
      acceptor_(io),
      accept_retry_(clock.make_timer()),
      gate_(limits),
      gate_timer_(clock.make_timer()) {}

ControlDoor::~ControlDoor() { close(); }

boost::system::error_code ControlDoor::open(const std::string& address_text, uint16_t port) {
  namespace ip = boost::asio::ip;
  closed_ = false;  // a start that failed may be tried again
  boost::system::error_code error;
  ip::address address = ip::make_address(address_text, error);
  if (error) return error;
  ip::tcp::endpoint endpoint(address, port);
  acceptor_.open(endpoint.protocol(), error);
  if (error) return error;
  acceptor_.set_option(ip::tcp::acceptor::reuse_address(true), error);
  if (address.is_v6()) acceptor_.set_option(ip::v6_only(false), error);
  acceptor_.bind(endpoint, error);
  if (!error) acceptor_.listen(4096, error);
  if (error) {
    acceptor_.close();
    return error;
  }
  port_ = acceptor_.local_endpoint().port();
  return {};
}

void ControlDoor::start() { accept_next(); }

void ControlDoor::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  accept_retry_->cancel();
  gate_timer_->cancel();
}

void ControlDoor::accept_next() {
  acceptor_.async_accept(
      [this](const boost::system::error_code& error, boost::asio::ip::tcp::socket socket) {
        if (closed_) return;
        if (!error) {
          accept_shortage_.accepted();
          admit(std::move(socket));
          accept_backoff_.reset();
        } else if (error == boost::asio::error::operation_aborted) {
          return;
        } else if (AcceptBackoff::is_shortage(error)) {
          return accept_shortage_.refuse_pending(
              acceptor_,
              [this] {
                if (!closed_) accept_next();
              },
              [this, error] { accept_later(error); });
        } else {
          log::warn("rendezvous: accept failed: ", error.message());
        }
        accept_next();
      });
}

// Out of descriptors the pending connection stays queued: wait (100 ms doubling to 1 s) rather
// than fail again at once, and say so at most once a second.
void ControlDoor::accept_later(const boost::system::error_code& error) {
  std::chrono::milliseconds delay = accept_backoff_.next_delay();
  if (accept_backoff_.time_to_log(clock_.now())) {
    log::warn("rendezvous: accept failed (", error.message(), "), trying again in ", delay.count(),
              " ms");
  }
  accept_retry_->start_after(delay, [this] {
    if (!closed_) accept_next();
  });
}

// A new connection: past the gate's caps the oldest overdue strangers make room for it, or it
// waits unread until one proves itself, closes or turns overdue (refused only when every place is
// held by proven or young connections); started, it is challenged, with a small frame limit and
// a deadline until it proves itself.
void ControlDoor::admit(boost::asio::ip::tcp::socket socket) {
  boost::system::error_code error;
  auto remote = socket.remote_endpoint(error);
  std::string peer = error ? std::string("?") : remote.address().to_string();
  uint64_t gate_id = next_gate_id_++;
  Admission admission = gate_.admit(gate_id, peer, clock_.now());
  if (!admission.refusal.empty()) {
    if (refusal_log_.due(clock_.now())) {
      log::warn("rendezvous: refusing a connection from ", peer, ": ", admission.refusal);
    }
    socket.close(error);
    return;
  }
  std::shared_ptr<ControlSession> session = make_session_(std::move(socket));
  strangers_[gate_id] = session;
  session->gate_id = gate_id;
  session->peer = peer;
  session->skip_leading(proto::kSilentPeerProbe);
  // Unread while it waits: one that closes or speaks before its challenge (no agent does) goes
  // at once, not when its turn comes.
  session->watch_unstarted(
      [this, weak = std::weak_ptr<ControlSession>(session)](const std::string& why) {
        auto gone = weak.lock();
        if (!gone || closed_) return;
        if (refusal_log_.due(clock_.now())) {
          log::warn("rendezvous: closing a connection from ", gone->peer,
                    " that waits its turn: ", why);
        }
        gone->close_now(why);
      });
  let_in(std::move(admission));
}

// Carries out the gate's decisions, then pumps it until it has none: a close in the middle only
// frees room, which the next pump hands out. Arms gate_timer_ for the next stranger to turn
// overdue while connections wait.
void ControlDoor::let_in(Admission admission) {
  letting_in_ = true;
  for (;;) {
    evict(admission);
    for (uint64_t id : admission.start) start_stranger(id);
    admission = gate_.pump(clock_.now());
    if (admission.evict.empty() && admission.start.empty()) break;
  }
  letting_in_ = false;
  if (auto at = gate_.next_pump(clock_.now())) {
    gate_timer_->start_at(*at, [this] { pump_gate(); });
  } else {
    gate_timer_->cancel();
  }
}

// A stranger proved itself or closed, or one turned overdue: waiting connections may start.
void ControlDoor::pump_gate() {
  if (letting_in_ || closed_) return;
  let_in(gate_.pump(clock_.now()));
}

void ControlDoor::start_stranger(uint64_t gate_id) {
  auto found = strangers_.find(gate_id);
  if (found == strangers_.end()) return;
  std::shared_ptr<ControlSession> session = found->second.lock();
  if (!session) return;
  session->challenge = proto::random_nonce();
  session->limit_frames(proto::kMaxFirstFrameBytes);
  session->hello_deadline = clock_.make_timer();
  session->hello_deadline->start_after(
      hello_timeout_, [this, weak = std::weak_ptr<ControlSession>(session)] {
        auto expired = weak.lock();
        if (!expired || closed_) return;
        log::info("rendezvous: closing a connection from ", expired->peer,
                  ": no hello within the hello timeout");
        expired->close_now("no hello within the hello timeout");
      });
  session->start();
  session->send(proto::Challenge{session->challenge});
}

// Strangers that make room for a newcomer: closed at once, unsent bytes and all.
void ControlDoor::evict(const Admission& admission) {
  for (uint64_t id : admission.evict) {
    auto found = strangers_.find(id);
    if (found == strangers_.end()) continue;
    std::shared_ptr<ControlSession> stranger = found->second.lock();
    strangers_.erase(found);
    if (!stranger) continue;
    if (refusal_log_.due(clock_.now())) {
      log::warn("rendezvous: closing a connection from ", stranger->peer, ": ", admission.why);
    }
    stranger->close_now("evicted to make room: " + admission.why);
  }
}

void ControlDoor::proven(ControlSession& session) {
  session.proven = true;
  session.hello_deadline.reset();
  session.limit_frames(proto::kMaxFrameBytes);
  gate_.proven(session.gate_id);
  strangers_.erase(session.gate_id);
  pump_gate();
}

void ControlDoor::closed(ControlSession& session) {
  gate_.closed(session.gate_id);
  strangers_.erase(session.gate_id);
  session.hello_deadline.reset();
  pump_gate();
}

}  // namespace cohort
