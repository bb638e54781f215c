// One control-protocol connection (agent <-> daemon, either side): reads frames and hands each
// decoded message to its owner, queues outgoing messages in order, and closes on a malformed
// frame, on end of file, or when told to (after flushing a last message). The owner learns of
// every close exactly once. Shared by its owner and its pending handlers; io thread only.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/clock.hpp"
#include "proto/control_frame.hpp"
#include "proto/control_messages.hpp"

namespace cohort {

class ControlSession : public std::enable_shared_from_this<ControlSession> {
 public:
  /// Bytes queued for a peer that does not read; past this the connection is dropped.
  static constexpr size_t kMaxOutboxBytes = 8 << 20;

  using MessageHandler = std::function<void(ControlSession&, proto::ControlMessage)>;
  using CloseHandler = std::function<void(ControlSession&, const std::string& reason)>;

  ControlSession(boost::asio::ip::tcp::socket socket, MessageHandler on_message,
                 CloseHandler on_close);
  ControlSession(const ControlSession&) = delete;
  ControlSession& operator=(const ControlSession&) = delete;

  void start();
  /// Before start(), while the owner keeps the connection unread (waiting its turn): calls
  /// `gone` once the peer closes, or sends anything but the start of what skip_leading() named
  /// (a cohort peer speaks after the owner's first message). Reads nothing; start() ends it.
  void watch_unstarted(std::function<void(const std::string& why)> gone);
  /// Before start(), on a port shared with a worker store: calls `ready` once the peer has sent
  /// something or closed (ending watch_unstarted()), reading nothing. Once.
  void when_readable(std::function<void()> ready);
  /// Up to `max` of the bytes the peer sent, left unread (peeked).
  std::string peek(size_t max);
  /// Takes the unstarted connection away from the session (another server serves it), from
  /// when_readable()'s callback, where nothing else is pending. The owner hears of it as of a
  /// close, for `reason`; handed_over() then says why.
  boost::asio::ip::tcp::socket hand_over(const std::string& reason);
  bool handed_over() const { return handed_over_; }
  /// From the next frame on, the peer's frames may be up to this size.
  void limit_frames(uint32_t max_frame_bytes) { decoder_.set_max_frame_bytes(max_frame_bytes); }
  void send(const proto::ControlMessage& message);
  /// Sends `bytes` as they are, no frame (the client's probe of a peer that says nothing).
  void send_bytes(const std::string& bytes);
  /// The peer's bytes that begin with `leading` (the client's probe) are read past, not decoded;
  /// any other start is decoded as it is. Call before start().
  void skip_leading(std::string_view leading) { leading_ = leading; }
  /// The first bytes the peer sent (at most 16): what it speaks when it is no cohort peer.
  const std::string& first_bytes() const { return first_bytes_; }
  /// Sends `last` (if any) and then closes; no message is delivered after this call. A peer that
  /// has not taken what is left to send within the close grace is reset (it reads nothing).
  void close_after(std::optional<proto::ControlMessage> last, const std::string& reason);
  /// How long close_after() waits for the peer to take what is left (default 30 s).
  void set_close_grace(std::chrono::milliseconds grace) { close_grace_ = grace; }
  /// Closes at once without telling the owner (the owner already knows).
  void abandon();
  /// Closes at once, unsent messages and all; the owner hears `reason`.
  void close_now(const std::string& reason) { finish(reason); }
  /// close_now(), and what the kernel still holds for the peer is dropped too (a reset): for a
  /// peer that does not read.
  void reset_now(const std::string& reason);
  bool open() const { return open_; }
  /// Bytes queued or being written, not yet taken by the socket.
  size_t unsent_bytes() const { return outbox_.size() + in_flight_.size(); }
  /// The connection closed because the peer's bytes were no frame or no message of ours.
  bool peer_broke_protocol() const { return peer_broke_protocol_; }
  /// The local address of the connection: the address the peer used to reach us.
  std::string local_address() const;
  std::string remote_address() const;

  /// Owner data: the challenge this connection's proofs must answer, the deadline for its first
  /// message and whether it came (proven), its id at the owner's connection gate, the peer's
  /// address, and the node it speaks for once it said hello.
  std::string challenge;
  std::unique_ptr<Timer> hello_deadline;
  /// On a port shared with a worker store: how long the owner waits for the peer's first bytes.
  std::unique_ptr<Timer> first_words_timer;
  /// A status or events reply on its way: its bytes, and when the connection closes unread.
  size_t reply_bytes = 0;
  std::unique_ptr<Timer> reply_deadline;
  bool proven = false;
  uint64_t gate_id = 0;
  std::string peer;
  std::string run_id;
  std::string node_id;

 private:
  void read_more();
  void on_read(const boost::system::error_code& error, size_t size);
  void feed(const char* data, size_t size);
  void flush();
  void finish(const std::string& reason);

  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer close_deadline_;  ///< close_after()'s grace for a peer that won't read
  std::chrono::milliseconds close_grace_{30000};
  MessageHandler on_message_;
  CloseHandler on_close_;
  proto::FrameDecoder decoder_;
  char buffer_[4096];
  std::string outbox_, in_flight_;
  bool open_ = true;
  bool watching_ = false;  ///< watch_unstarted()'s wait is pending
  bool closing_ = false;
  bool peer_broke_protocol_ = false;
  bool handed_over_ = false;
  std::string first_bytes_;
  std::string_view leading_;  ///< still to be matched by the peer's first bytes (skip_leading)
  size_t leading_matched_ = 0;
  std::string close_reason_;
};

}  // namespace cohort
