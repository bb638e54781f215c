// Framing of the control protocol between agents and the rendezvous daemon: each frame is a
// 4-byte big-endian length followed by that many bytes of JSON. FrameDecoder is incremental and
// pure: feed it bytes in any split, take whole frames out; a length above kMaxFrameBytes is an
// error before anything is allocated. Used by one connection on one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cohort::proto {

constexpr uint32_t kMaxFrameBytes = 1 << 20;  // 1 MiB: a failure summary fits many times over

/// The 4-byte length and the payload, ready to write.
std::string encode_frame(std::string_view payload);

class FrameDecoder {
 public:
  enum class Status { NeedMore, Frame, Error };

  void feed(const char* data, size_t size) { buffer_.append(data, size); }
  /// Takes the next whole frame into `payload` (Frame), or says more bytes are needed, or that
  /// the stream is broken (Error: the length is too large; the connection must close).
  Status next(std::string& payload);
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  std::string buffer_;
  size_t consumed_ = 0;
};

}  // namespace cohort::proto
