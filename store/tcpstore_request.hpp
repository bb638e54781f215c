// The typed form of one PyTorch TCPStore request, as the decoder yields it and the store applies
// it, independent of which opcode numbering the client spoke (shared/docs/tcpstore-protocol.md
// §2-3). Plain data; safe for concurrent const use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

enum class StoreOp : uint8_t {
  Validate,
  Set,
  CompareSet,
  Get,
  Add,
  Check,
  Wait,
  GetNumKeys,
  WatchKey,
  DeleteKey,
  Append,
  MultiGet,
  MultiSet,
  CancelWait,
  Ping,
  QueuePush,
  QueuePop,
  QueueLen,
  ListKeys,
  Barrier,
};

std::string_view op_name(StoreOp op);

/// Fields by operation (absent ones stay empty or 0):
/// - Set, Append, QueuePush: keys[0], values[0]
/// - CompareSet: keys[0], values = {expected, desired}
/// - Get, DeleteKey, WatchKey, QueuePop, QueueLen: keys[0]
/// - Add: keys[0], number = delta
/// - Barrier: keys[0], number = world size
/// - Check, Wait, MultiGet: keys
/// - MultiSet: keys[i] = values[i]
/// - Ping: number = nonce
/// - Validate: number = magic
/// - GetNumKeys, CancelWait, ListKeys: nothing
struct StoreRequest {
  StoreOp op = StoreOp::GetNumKeys;
  std::vector<std::string> keys;
  std::vector<std::string> values;
  int64_t number = 0;

  bool operator==(const StoreRequest&) const = default;
};

}  // namespace cohort
