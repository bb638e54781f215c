// Byte strings for TCPStore wire tests: hex("00 ce f7") for literal bytes, and the codec's own
// little-endian integer and length-prefixed value encodings. Header-only; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "store/tcpstore_codec.hpp"

namespace cohort::test {

/// "00 ce f7 85 3c" -> those five bytes (spaces are ignored).
inline std::string hex(std::string_view text) {
  std::string bytes;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    bytes.push_back(static_cast<char>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16)));
    i += 2;
  }
  return bytes;
}

inline std::string u8(uint8_t value) {
  std::string out;
  append_u8(out, value);
  return out;
}

inline std::string i64(int64_t value) {
  std::string out;
  append_i64(out, value);
  return out;
}

inline std::string u64(uint64_t value) { return i64(static_cast<int64_t>(value)); }

/// A u64 length, then the bytes.
inline std::string bytes(std::string_view value) {
  std::string out;
  append_bytes(out, value);
  return out;
}

}  // namespace cohort::test
