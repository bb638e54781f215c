// The PyTorch TCPStore wire protocol (docs/tcpstore-protocol.md): an incremental request decoder
// that detects each connection's opcode numbering from its first bytes, and the encoders of
// replies (and, for tests and load generators, of requests). Pure: no I/O, no clock. One
// TcpStoreDecoder per connection, used by the thread that reads that connection. The strings of
// finished requests go to a small per-thread pool that the next fields decoded on that thread
// reuse, so a warm connection's requests allocate nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/tcpstore_request.hpp"

namespace cohort {

/// Opcode tables (§2). Legacy113 is PyTorch 1.13/2.0; Legacy21 is the mid-2023 table without
/// WATCH_KEY or VALIDATE; Validated is the 2.2+ table that starts every connection with VALIDATE.
enum class StoreNumbering : uint8_t { Legacy113, Legacy21, Validated };

inline constexpr uint32_t kStoreValidateMagic = 0x3C85F7CE;

/// Reply bytes of WAIT, CANCEL_WAIT and BARRIER.
enum class StoreWaitReply : uint8_t { StopWaiting = 0, WaitCanceled = 1 };
/// Reply bytes of CHECK.
enum class StoreCheckReply : uint8_t { Ready = 0, NotReady = 1 };
/// The one reply to a 1.13 WATCH_KEY (KEY_CALLBACK_REGISTERED); no notification ever follows.
inline constexpr uint8_t kStoreWatchRegistered = 3;

enum class DecodeStatus : uint8_t { NeedMore, Request, Error };

struct DecodeStep {
  DecodeStatus status = DecodeStatus::NeedMore;
  size_t consumed = 0;  ///< bytes of the input used, whatever the status
};

class TcpStoreDecoder {
 public:
  /// `legacy` is the table used for connections that do not start with VALIDATE.
  explicit TcpStoreDecoder(StoreNumbering legacy = StoreNumbering::Legacy113);

  /// Asked with the bytes the current request has declared so far (every length prefix read,
  /// plus kStoreFieldOverheadBytes for each field: what its string takes, however short), before
  /// each field's body is read; a non-empty answer fails the stream with that reason.
  using DeclaredCheck = std::function<std::string(uint64_t declared_bytes)>;
  void check_declared(DeclaredCheck check) { check_declared_ = std::move(check); }

  /// Consumes bytes up to the end of the next complete request. NeedMore: every byte was
  /// consumed and buffered. Request: take_request() holds it; feed the rest again. Error: the
  /// stream is unusable (error() says why) and every later feed fails too.
  DecodeStep feed(std::string_view bytes);
  /// Moves out the request completed by the last feed and readies the next one.
  StoreRequest take_request();
  /// The request completed by the last feed, to be applied in place (the store may take its
  /// strings, or swap them for others); recycle_request() or the next feed() readies the next.
  StoreRequest& request() { return request_; }
  /// Readies the next request and gives the buffers of the last one to this thread's pool.
  void recycle_request() { reset(); }

  const std::string& error() const { return error_; }
  /// The connection's numbering once its first bytes decided it.
  std::optional<StoreNumbering> numbering() const { return numbering_; }
  /// True between requests (nothing partial is buffered).
  bool idle() const { return phase_ == Phase::Opcode; }

 private:
  enum class Phase : uint8_t { Opcode, Detect, Fields, Done, Failed };

  size_t step_fields(std::string_view bytes);
  bool start_op(uint8_t opcode);
  bool read_fixed(std::string_view bytes, size_t& pos, size_t width);
  bool read_field_bytes(std::string_view bytes, size_t& pos, std::vector<std::string>& list,
                        uint64_t limit);
  void fail(std::string message);
  void reset();

  StoreNumbering legacy_;
  std::optional<StoreNumbering> numbering_;
  Phase phase_ = Phase::Opcode;
  const uint8_t* program_ = nullptr;  ///< field list of the current op, ends with 0
  uint8_t field_ = 0;                 ///< index into program_
  bool in_body_ = false;              ///< a bytes field's length is read, its body is not
  bool pair_value_next_ = false;      ///< MULTI_SET: the next item half is a value
  uint8_t fixed_have_ = 0;
  std::array<uint8_t, 8> fixed_{};
  uint64_t body_left_ = 0;
  uint64_t items_left_ = 0;
  uint64_t request_bytes_ = 0;   ///< the lengths of its fields (kStoreMaxRequestBytes bounds them)
  uint64_t declared_bytes_ = 0;  ///< and what their strings take beyond (check_declared_ asks)
  StoreRequest request_;
  std::string error_;
  DeclaredCheck check_declared_;
};

/// Reply encoders: integers little-endian, `bytes` as u64 length + raw bytes (§1).
void append_u8(std::string& out, uint8_t value);
void append_u32(std::string& out, uint32_t value);
void append_i64(std::string& out, int64_t value);
void append_bytes(std::string& out, std::string_view value);

/// Whether `first_bytes`, what a connection sent first (9 bytes or more to tell), begin a
/// PyTorch TCPStore client's request: VALIDATE and its magic (2.2+), or an opcode of the older
/// tables and a key length below 64 KiB (u64, little-endian). Used to say why a worker that
/// connected to the rendezvous port instead of its store will wait in vain.
bool starts_like_tcpstore_request(std::string_view first_bytes);
/// Whether `first_bytes` are too few to tell yet: no bytes, or fewer than 9 that could still
/// begin such a request (a first byte that is an opcode of some table).
bool may_start_tcpstore_request(std::string_view first_bytes);

/// Encodes a request as a client of that numbering sends it (Validate includes its magic).
/// False, with `out` unchanged, when the op does not exist in that numbering.
bool append_request(std::string& out, const StoreRequest& request, StoreNumbering numbering);

}  // namespace cohort
