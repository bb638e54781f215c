// What all the worker stores of one process may hold together (`--store-budget`): each store's
// quota bounds one run's store, this bounds the sum, so that a client able to start many runs
// cannot multiply the quota by the number of runs. Stores take their growth from it before they
// grow and give it back as they shrink or are destroyed. Shared (std::shared_ptr) by the daemon
// and every store it hosts; any thread (an atomic counter).
#pragma once

#include <atomic>
#include <cstdint>

namespace cohort {

class StoreBudget {
 public:
  explicit StoreBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}
  StoreBudget(const StoreBudget&) = delete;
  StoreBudget& operator=(const StoreBudget&) = delete;

  /// Takes `bytes` if they fit in what is left; false (nothing taken) otherwise.
  bool try_take(uint64_t bytes);
  /// Takes `bytes` whether they fit or not (replies already made, checked against room() first).
  void take(uint64_t bytes) { used_.fetch_add(bytes, std::memory_order_relaxed); }
  void give_back(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  /// What is left; 0 once taken past the limit.
  uint64_t room() const;

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace cohort
