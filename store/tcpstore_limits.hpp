// Bounds on what one TCPStore request may carry and produce. The decoder checks every length
// prefix against these before it stores a single byte of the field, so a hostile length never
// becomes an allocation. They are at least the 2.x libuv server's limits (8 KiB keys, 8 MiB
// values, 131072 keys per request).
#pragma once

#include <cstdint>

namespace cohort {

inline constexpr uint64_t kStoreMaxKeyBytes = 64 * 1024;
inline constexpr uint64_t kStoreMaxValueBytes = 64 * 1024 * 1024;
inline constexpr uint64_t kStoreMaxKeysPerRequest = 131072;
/// Sum of all key and value lengths of one request (bounds MULTI_SET as a whole).
inline constexpr uint64_t kStoreMaxRequestBytes = 256 * 1024 * 1024;
/// Largest reply one request may produce (bounds MULTI_GET of many keys naming a large value).
inline constexpr uint64_t kStoreMaxReplyBytes = 256 * 1024 * 1024;

}  // namespace cohort
