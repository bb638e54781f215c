#include "proto/control_frame.hpp"

namespace cohort::proto {

std::string encode_frame(std::string_view payload) {
  uint32_t size = static_cast<uint32_t>(payload.size());
  std::string frame;
  frame.reserve(4 + payload.size());
  for (int shift = 24; shift >= 0; shift -= 8) frame.push_back(static_cast<char>(size >> shift));
  frame.append(payload);
  return frame;
}

FrameDecoder::Status FrameDecoder::next(std::string& payload) {
  if (buffered() < 4) return Status::NeedMore;
  const auto* head = reinterpret_cast<const unsigned char*>(buffer_.data() + consumed_);
  uint32_t size = (uint32_t{head[0]} << 24) | (uint32_t{head[1]} << 16) | (uint32_t{head[2]} << 8) |
                  uint32_t{head[3]};
  if (size > max_) return Status::Error;
  if (buffered() < 4 + size) return Status::NeedMore;
  payload.assign(buffer_, consumed_ + 4, size);
  consumed_ += 4 + size;
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  } else if (consumed_ > 64 * 1024) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  return Status::Frame;
}

}  // namespace cohort::proto
