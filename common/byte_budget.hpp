// A number of bytes that several holders of one kind of memory may hold together, when each
// holder has a bound of its own too: the worker stores of a daemon (`--store-budget`; each store
// has its quota), the flight-recorder dumps its runs gather after hangs (each gathering has its
// cap). Without it, a client able to start runs would multiply a holder's bound by the number of
// runs. Holders take bytes before they grow and give them back as they shrink or are destroyed.
// Shared (std::shared_ptr) by its owner and every holder; any thread (an atomic counter).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace cohort {

class ByteBudget {
 public:
  explicit ByteBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

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

// One holder's part of a ByteBudget (a store's, a gathering's): what it has taken, all given back
// when it is destroyed. Without a budget every call succeeds and nothing is counted. Owned by its
// holder, on the holder's thread (the budget is shared, the share is not).
class BudgetShare {
 public:
  explicit BudgetShare(std::shared_ptr<ByteBudget> budget = nullptr) : budget_(std::move(budget)) {}
  ~BudgetShare() { resize(0); }
  BudgetShare(const BudgetShare&) = delete;
  BudgetShare& operator=(const BudgetShare&) = delete;

  /// Takes `bytes` more if they fit in the budget; false (nothing taken) otherwise.
  bool grow(uint64_t bytes);
  /// Makes the share `bytes`, fitting or not: what the holder holds now.
  void resize(uint64_t bytes);
  /// The shared budget; null without one.
  const ByteBudget* budget() const { return budget_.get(); }

 private:
  std::shared_ptr<ByteBudget> budget_;
  uint64_t taken_ = 0;
};

}  // namespace cohort
