// The one test of UTF-8 that cutting and counting characters need: whether a byte continues a
// character (10xxxxxx) rather than starting one. For text already valid UTF-8; header only, so
// that the few who count characters need not rebuild with common/text.hpp. Any thread.
#pragma once

namespace cohort {

/// True for a byte that continues a UTF-8 character: never a place to cut, never a column.
inline bool continues_utf8_character(char byte) {
  return (static_cast<unsigned char>(byte) & 0xc0) == 0x80;
}

}  // namespace cohort
