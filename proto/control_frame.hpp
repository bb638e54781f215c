// Framing of the control protocol between agents and the rendezvous daemon: each frame is a
// 4-byte big-endian length followed by that many bytes of JSON. FrameDecoder is incremental and
// pure: feed it bytes in any split, take whole frames out; a length above its limit (kMaxFrameBytes
// unless told otherwise) is an error before anything is allocated. Used by one connection on one
// thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cohort::proto {

constexpr uint32_t kMaxFrameBytes = 1 << 20;  // 1 MiB: a failure summary fits many times over
/// Before a connection has proven itself (hello or status), a daemon reads no larger frame.
constexpr uint32_t kMaxFirstFrameBytes = 64 << 10;
/// A status reply lists every run of a daemon: `cohort status` reads one up to this size.
constexpr uint32_t kMaxStatusFrameBytes = 64 << 20;

/// What a client sends, unframed, on a connection where no challenge came by its first heartbeat:
/// an HTTP server (the daemon's --http-port) answers it in its own words. A daemon skips it when
/// it leads a connection (its 4 bytes read as a length far above any limit, so no frame begins
/// so), so a daemon merely slow to send its challenge is not broken by it.
constexpr std::string_view kSilentPeerProbe = "GET / HTTP/1.0\r\n\r\n";
/// Whether a peer's first bytes are an HTTP answer (to the probe): a daemon's --http-port.
inline bool speaks_http(std::string_view first_bytes) {
  return first_bytes.substr(0, 5) == "HTTP/";
}

/// The 4-byte length and the payload, ready to write.
std::string encode_frame(std::string_view payload);

class FrameDecoder {
 public:
  enum class Status { NeedMore, Frame, Error };

  explicit FrameDecoder(uint32_t max_frame_bytes = kMaxFrameBytes) : max_(max_frame_bytes) {}
  /// From the next frame on, frames up to this size are accepted.
  void set_max_frame_bytes(uint32_t max_frame_bytes) { max_ = max_frame_bytes; }
  void feed(const char* data, size_t size) { buffer_.append(data, size); }
  /// Takes the next whole frame into `payload` (Frame), or says more bytes are needed, or that
  /// the stream is broken (Error: the length is too large; the connection must close).
  Status next(std::string& payload);
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  uint32_t max_;
  std::string buffer_;
  size_t consumed_ = 0;
};

}  // namespace cohort::proto
