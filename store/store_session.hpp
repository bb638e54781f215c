// One client connection of the worker store: reads when the socket is readable (no buffer of
// its own while idle), decodes requests with its TcpStoreDecoder, passes them to the service,
// and writes replies in order. Any decode or store error closes this connection only. Owned by
// StoreService's registry and by its own pending handlers; io_context thread only.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "store/store.hpp"
#include "store/tcpstore_codec.hpp"

namespace cohort {

class StoreService;

class StoreSession : public std::enable_shared_from_this<StoreSession> {
 public:
  /// Unsent reply bytes above which the session stops decoding and reading until the client
  /// catches up.
  static constexpr size_t kMaxUnsentBytes = 16 * 1024 * 1024;

  StoreSession(std::shared_ptr<StoreService> service, boost::asio::ip::tcp::socket socket,
               StoreConnectionId id, StoreNumbering legacy_numbering);
  StoreSession(const StoreSession&) = delete;
  StoreSession& operator=(const StoreSession&) = delete;

  void start() { wait_readable(); }
  StoreConnectionId id() const { return id_; }
  /// Queues reply bytes; written at once unless a read batch is being processed.
  void send(std::string_view bytes);
  /// Closes the socket and leaves the service. Idempotent.
  void close(std::string_view reason);
  /// close() for a client's fault (a malformed request, a limit): logs a warning naming the peer.
  void refuse(std::string_view reason);

 private:
  void wait_readable();
  void on_readable(const boost::system::error_code& error);
  void consume(std::string_view bytes);
  void flush();
  void on_written(const boost::system::error_code& error);
  void resume_reading_if_drained();
  bool drain_stash();
  std::string charge_declared(uint64_t declared_bytes);
  void release_charge();
  size_t unsent() const { return outbox_.size() + in_flight_.size(); }

  std::shared_ptr<StoreService> service_;
  boost::asio::ip::tcp::socket socket_;
  TcpStoreDecoder decoder_;
  std::string outbox_;     ///< replies not yet given to the socket
  std::string in_flight_;  ///< the buffer of the async write in progress
  std::string stash_;      ///< input not decoded yet while replies drain (usually empty)
  StoreConnectionId id_;
  uint64_t charged_ = 0;  ///< what the request still arriving has charged against the quota
  bool batching_ = false;
  bool writing_ = false;
  bool read_paused_ = false;
  bool closed_ = false;
};

}  // namespace cohort
