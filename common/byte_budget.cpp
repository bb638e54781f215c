#include "common/byte_budget.hpp"

namespace cohort {

bool ByteBudget::try_take(uint64_t bytes) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used > limit_ || bytes > limit_ - used) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

bool BudgetShare::grow(uint64_t bytes) {
  if (!budget_) return true;
  if (!budget_->try_take(bytes)) return false;
  taken_ += bytes;
  return true;
}

void BudgetShare::resize(uint64_t bytes) {
  if (!budget_) return;
  if (bytes > taken_) budget_->take(bytes - taken_);
  if (bytes < taken_) budget_->give_back(taken_ - bytes);
  taken_ = bytes;
}

uint64_t ByteBudget::room() const {
  uint64_t used = this->used();
  return used >= limit_ ? 0 : limit_ - used;
}

}  // namespace cohort
