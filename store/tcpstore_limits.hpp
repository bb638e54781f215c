// Bounds on what one TCPStore request may carry and produce, and on what one store may hold. The
// decoder checks every length prefix against the request bounds before it stores a single byte of
// the field, so a hostile length never becomes an allocation; the Store checks the same bounds
// (StoreLimits, lowerable in tests) on what a request would make of a value or a reply, and its
// quota on the whole. They are at least the 2.x libuv server's limits (8 KiB keys, 8 MiB values,
// 131072 keys per request). store/FORMAT.md lists them.
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
/// Default quota of one store (one run's round): keys, values and queue items, see StoreLimits.
inline constexpr uint64_t kStoreDefaultQuotaBytes = uint64_t{1} << 30;
/// Default budget of all the stores of one process together (ByteBudget, `--store-budget`): a
/// client that can start runs would otherwise hold a quota per run.
inline constexpr uint64_t kStoreDefaultBudgetBytes = uint64_t{4} << 30;
/// What a request still arriving counts for each of its keys and values beyond their bytes: the
/// 32-byte string the decoder keeps it in, in a list that may have twice the room it uses. A
/// request of 131072 empty pairs declares no bytes, yet holds 16 MiB until it completes.
inline constexpr uint64_t kStoreFieldOverheadBytes = 64;
/// What a request still arriving may declare before its declared bytes count against the quota
/// (one longest key: a GET goes through even on a full store). Past it, every byte its length
/// prefixes announce, and kStoreFieldOverheadBytes per field, is charged before the body is
/// read, until the request completes or its connection closes.
inline constexpr uint64_t kStoreUnchargedRequestBytes =
    kStoreMaxKeyBytes + kStoreFieldOverheadBytes;
/// Unsent replies past which a connection's session applies none of its requests (and reads
/// none) until its client reads: a client that asks and never reads stalls only itself.
inline constexpr uint64_t kStoreMaxUnsentBytes = 64 * 1024;
/// A reply larger than this is refused if it would not fit in the quota's room (or the budget's),
/// and what a connection leaves unread past kStoreMaxUnsentBytes and this (only such a large
/// reply takes it there) counts against the quota until its client reads it. Smaller replies are
/// never charged, so they cannot take the store past its quota unchecked.
inline constexpr uint64_t kStoreUnchargedReplyBytes = 64 * 1024;
/// What the quota charges for each key and each queue item beyond its bytes (the map entry and
/// string headers), so that a million empty keys cost what they really take.
inline constexpr uint64_t kStoreEntryOverheadBytes = 128;

/// The bounds one Store enforces; the defaults are the decoder's. Tests lower them.
struct StoreLimits {
  uint64_t quota_bytes = kStoreDefaultQuotaBytes;      ///< all keys, values and queue items
  uint64_t max_value_bytes = kStoreMaxValueBytes;      ///< one value, also after APPEND
  uint64_t max_request_bytes = kStoreMaxRequestBytes;  ///< keys + values of one MULTI_SET
  uint64_t max_reply_bytes = kStoreMaxReplyBytes;      ///< one reply (GET, MULTI_GET, LIST_KEYS)
};

}  // namespace cohort
