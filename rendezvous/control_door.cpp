#include "rendezvous/control_door.hpp"

#include "common/log.hpp"
#include "proto/auth.hpp"
#include "store/tcpstore_codec.hpp"

namespace cohort {

ControlDoor::ControlDoor(boost::asio::io_context& io, Clock& clock, ConnectionLimits limits,
                         std::chrono::milliseconds hello_timeout, MakeSession make_session)
    : clock_(clock),
      hello_timeout_(hello_timeout),
      make_session_(std::move(make_session)),
      accept_loop_(io, clock, "rendezvous",
                   [this](boost::asio::ip::tcp::socket socket, const std::string& peer) {
                     admit(std::move(socket), peer);
                   }),
      gate_keeper_(
          limits, clock, [this](uint64_t id, const std::string& why) { evict(id, why); },
          [this](uint64_t id) { start_stranger(id); }) {}

ControlDoor::~ControlDoor() { close(); }

boost::system::error_code ControlDoor::open(const std::string& address, uint16_t port) {
  return accept_loop_.open(address, port, 4096);
}

void ControlDoor::close() {
  if (closed_) return;
  closed_ = true;
  accept_loop_.close();
  gate_keeper_.close();
}

// A new connection: past the gate's caps the oldest overdue strangers make room for it, or it
// waits unread until one proves itself, closes or turns overdue (refused only when every place is
// held by proven or young connections); started, it is challenged, with a small frame limit and
// a deadline until it proves itself.
void ControlDoor::admit(boost::asio::ip::tcp::socket socket, const std::string& peer) {
  uint64_t gate_id = next_gate_id_++;
  Admission admission = gate_keeper_.admit(gate_id, peer);
  if (!admission.refusal.empty()) {
    if (refusal_log_.due(clock_.now())) {
      log::warn("rendezvous: refusing a connection from ", peer, ": ", admission.refusal);
    }
    boost::system::error_code ignored;
    socket.close(ignored);
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
        // On a shared port a TCPStore client speaks first, rightly: its turn decides.
        if (take_store_client_ && starts_like_tcpstore_request(gone->first_bytes())) return;
        if (refusal_log_.due(clock_.now())) {
          log::warn("rendezvous: closing a connection from ", gone->peer,
                    " that waits its turn: ", why);
        }
        gone->close_now(why);
      });
  gate_keeper_.let_in(std::move(admission));
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
  if (take_store_client_) return hear_first_words(session);
  challenge(*session);
}

void ControlDoor::challenge(ControlSession& session) {
  session.first_words_timer.reset();
  session.start();
  session.send(proto::Challenge{session.challenge});
}

// A shared port: the peer's first bytes, or its silence, say who it is. A cohort peer sends the
// probe first (or waits for its challenge); a TCPStore client sends a request.
void ControlDoor::hear_first_words(const std::shared_ptr<ControlSession>& session) {
  std::weak_ptr<ControlSession> weak = session;
  session->first_words_timer = clock_.make_timer();
  session->first_words_timer->start_after(kFirstWordsWait, [this, weak] {
    auto silent = weak.lock();
    if (silent && !closed_) challenge(*silent);
  });
  session->when_readable([this, weak] {
    auto spoke = weak.lock();
    if (spoke && !closed_ && spoke->first_words_timer) judge_first_words(spoke, 100);
  });
}

// A request's first 9 bytes normally come in one segment; a few may come first, and the rest
// within milliseconds (looked at again every 2 ms, `checks_left` times).
void ControlDoor::judge_first_words(const std::shared_ptr<ControlSession>& session,
                                    int checks_left) {
  std::string first = session->peek(16);
  if (starts_like_tcpstore_request(first)) return hand_to_store(session);
  if (!may_start_tcpstore_request(first) || checks_left == 0 || first.empty()) {
    return challenge(*session);  // a cohort peer, a closed one, or a stranger: as on any port
  }
  session->first_words_timer->start_after(
      std::chrono::milliseconds(2),
      [this, weak = std::weak_ptr<ControlSession>(session), checks_left] {
        auto again = weak.lock();
        if (again && !closed_) judge_first_words(again, checks_left - 1);
      });
}

// The session ends here (its owner hears of it, and closed() frees its place); the connection
// goes on in the store, or is closed.
void ControlDoor::hand_to_store(const std::shared_ptr<ControlSession>& session) {
  std::string peer = session->peer;
  if (take_store_client_(session->hand_over("handed to the workers' store"), peer)) return;
  if (tcpstore_client_log_.due(clock_.now())) {
    log::warn("rendezvous: a PyTorch TCPStore client at ", peer,
              " connected to the rendezvous port ", port(),
              " and was closed: it is handed to a worker store only while one run here has a "
              "round formed, whose store this daemon hosts");
  }
}

// A stranger that makes room for a newcomer: closed at once, unsent bytes and all.
void ControlDoor::evict(uint64_t gate_id, const std::string& why) {
  auto found = strangers_.find(gate_id);
  if (found == strangers_.end()) return;
  std::shared_ptr<ControlSession> stranger = found->second.lock();
  strangers_.erase(found);
  if (!stranger) return;
  if (refusal_log_.due(clock_.now())) {
    log::warn("rendezvous: closing a connection from ", stranger->peer, ": ", why);
  }
  stranger->close_now("evicted to make room: " + why);
}

void ControlDoor::proven(ControlSession& session) {
  session.proven = true;
  session.hello_deadline.reset();
  session.limit_frames(proto::kMaxFrameBytes);
  strangers_.erase(session.gate_id);
  gate_keeper_.proven(session.gate_id);
}

void ControlDoor::closed(ControlSession& session) {
  if (!session.proven && !session.handed_over() &&
      starts_like_tcpstore_request(session.first_bytes()) &&
      tcpstore_client_log_.due(clock_.now())) {
    log::warn("rendezvous: a PyTorch TCPStore client at ", session.peer,
              " connected to the rendezvous port ", port(),
              " and was closed: the workers' store is MASTER_ADDR:MASTER_PORT, not this port, so "
              "a worker whose init_method is 'tcp://HOST:",
              port(),
              "' fails (PyTorch 2.x) or waits until its timeout (1.13): give it "
              "init_method='env://' (the default)");
  }
  strangers_.erase(session.gate_id);
  session.hello_deadline.reset();
  session.first_words_timer.reset();
  gate_keeper_.closed(session.gate_id);
}

}  // namespace cohort
