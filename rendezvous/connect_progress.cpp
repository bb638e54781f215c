#include "rendezvous/connect_progress.hpp"

#include "common/text.hpp"

namespace cohort {

ConnectProgress::ConnectProgress(std::string endpoint, SteadyTime started, SteadyTime give_up_at,
                                 DeadlineWords deadline)
    : endpoint_(std::move(endpoint)),
      started_(started),
      give_up_at_(give_up_at),
      deadline_(std::move(deadline)) {}

std::optional<std::string> ConnectProgress::attempt_failed(SteadyTime now,
                                                           const std::string& reason,
                                                           bool unresolvable) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up_at_ - now);
  if (!last_said_) {
    if (!unresolvable && now - started_ < kFirstAfter) return std::nullopt;
    last_said_ = now;
    return cat("cannot reach the rendezvous at ", endpoint_, " (", reason, "); trying again, ",
               deadline_.action, " in ", format_duration(left), " (", deadline_.setting, ")");
  }
  if (now - *last_said_ < kEvery) return std::nullopt;
  last_said_ = now;
  return cat("still trying ", endpoint_, " (", reason, "), ", deadline_.action, " in ",
             format_duration(left));
}

}  // namespace cohort
