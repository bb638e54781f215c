#include "rendezvous/failure_blame.hpp"

namespace cohort::rdzv {

void FailureBlame::first(int round, const std::string& host, const std::string& cause) {
  pending_ = true;
  round_ = round;
  host_ = host;
  cause_ = cause;
  shared_ = false;
}

void FailureBlame::also(int round, const std::string& host, const std::string& cause) {
  if (!pending_ || round != round_ || host == host_ || cause_.empty()) return;
  if (cause == cause_) shared_ = true;
}

std::optional<std::string> FailureBlame::settle() {
  pending_ = false;
  if (!shared_) {
    shared_in_a_row_ = 0;
    shared_cause_.clear();
    return host_;
  }
  shared_in_a_row_ = cause_ == shared_cause_ ? shared_in_a_row_ + 1 : 1;
  shared_cause_ = cause_;
  return std::nullopt;
}

}  // namespace cohort::rdzv
