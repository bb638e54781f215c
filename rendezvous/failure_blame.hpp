// Whom a round's worker failure counts against: the host of the report that restarted the round,
// unless a node on another host reported the same failure (the same cause) in that round; then
// it is the job's (a configuration or code error), and no host's. It rules once the round's
// members are back, when every report they sent before rejoining has come. It also counts the
// rounds in a row that failed so, for the run's end to say it. Pure; owned by a run's RunState;
// one thread.
#pragma once

#include <optional>
#include <string>

namespace cohort::rdzv {

/// What a run ends with when every rank failed the same way.
inline constexpr const char* kSharedFailureText =
    "every rank failed the same way: a configuration or code error, not a node";

class FailureBlame {
 public:
  /// The report that restarts `round`, from `host`; an empty `cause` is never shared (a hang's
  /// root cause across nodes is blamed where it names).
  void first(int round, const std::string& host, const std::string& cause);
  /// Any later report of the same round; others are ignored.
  void also(int round, const std::string& host, const std::string& cause);
  bool pending() const { return pending_; }
  /// The ruling on the pending failure: the host it counts against, or nullopt when another
  /// host failed the same way.
  std::optional<std::string> settle();
  /// The last ruled rounds in a row that failed the same way on more than one host, and how.
  int shared_in_a_row() const { return shared_in_a_row_; }
  const std::string& shared_cause() const { return shared_cause_; }
  /// Whether a failure with `cause` would be the same shared failure again.
  bool repeats_shared(const std::string& cause) const {
    return shared_in_a_row_ > 0 && !cause.empty() && cause == shared_cause_;
  }

 private:
  bool pending_ = false;
  int round_ = -1;
  std::string host_, cause_;
  bool shared_ = false;
  int shared_in_a_row_ = 0;
  std::string shared_cause_;
};

}  // namespace cohort::rdzv
