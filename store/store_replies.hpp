// The replies that applying one request produces, each for a connection, in the order the store
// made them. Its strings keep their buffers from one request to the next (up to kKeptBytes
// each), so serving a warm connection allocates nothing for its replies. Owned by whoever calls
// Store::apply (StoreService, under its lock; a test); one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cohort {

using StoreConnectionId = uint64_t;

struct StoreReply {
  StoreConnectionId connection = 0;
  std::string bytes;  ///< append to that connection's output, in the order given
};

class StoreReplies {
 public:
  /// A reply buffer larger than this is freed by clear() rather than kept.
  static constexpr size_t kKeptBytes = 64 * 1024;
  /// Replies past this many (one SET that woke thousands of waiters) are freed by clear().
  static constexpr size_t kKeptReplies = 64;

  /// A new, empty reply to `connection`, after those already added.
  std::string& add(StoreConnectionId connection);
  /// Forgets every reply; keeps the buffers (the first kKeptReplies, up to kKeptBytes each).
  void clear();

  size_t size() const { return used_; }
  bool empty() const { return used_ == 0; }
  const StoreReply& operator[](size_t index) const { return entries_[index]; }
  const StoreReply* begin() const { return entries_.data(); }
  const StoreReply* end() const { return entries_.data() + used_; }

 private:
  std::vector<StoreReply> entries_;  ///< the first used_ are this request's replies
  size_t used_ = 0;
};

}  // namespace cohort
