// libFuzzer target: arbitrary bytes, cut into chunks, go through the control protocol's frame
// decoder and message decoder, as a daemon or an agent reads them. Checks that nothing crashes,
// leaks, overflows (UBSan) or allocates from a frame's length prefix, and that every message
// that decodes encodes to a frame that decodes to the same encoding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "proto/control_frame.hpp"
#include "proto/control_messages.hpp"

namespace {

using namespace cohort::proto;

void require(bool condition) {
  if (!condition) std::abort();
}

void check_message(const std::string& payload) {
  std::string error;
  std::optional<ControlMessage> message = decode_message(payload, error);
  if (!message) {
    require(!error.empty());
    return;
  }
  std::string encoded = encode_message(*message);
  FrameDecoder decoder;
  std::string frame = encode_frame(encoded);
  decoder.feed(frame.data(), frame.size());
  std::string again;
  require(decoder.next(again) == FrameDecoder::Status::Frame);
  std::optional<ControlMessage> decoded = decode_message(again, error);
  require(decoded.has_value());
  require(decoded->index() == message->index());
  require(encode_message(*decoded) == encoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte picks the chunk size (1..256), so one input explores many splits.
  if (size == 0) return 0;
  size_t chunk = static_cast<size_t>(data[0]) + 1;
  FrameDecoder decoder;
  bool closed = false;  // by a frame error, as the connection would be
  for (size_t pos = 1; pos < size && !closed; pos += chunk) {
    size_t length = std::min(chunk, size - pos);
    decoder.feed(reinterpret_cast<const char*>(data + pos), length);
    std::string payload;
    while (!closed) {
      FrameDecoder::Status status = decoder.next(payload);
      if (status == FrameDecoder::Status::NeedMore) break;
      closed = status == FrameDecoder::Status::Error;
      if (!closed) check_message(payload);
    }
  }
  // The same bytes as one payload, without framing: most inputs are not valid frames.
  check_message(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
