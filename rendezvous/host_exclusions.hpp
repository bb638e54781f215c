// Which hosts a run keeps out, and until when: each host's root-cause worker failures are counted,
// and the first failure at or past the limit while the run can do without the host excludes it
// for a cooldown that doubles each time (60 s, 120 s, 240 s, ... by default, at most a day); its
// count starts again after. Pure, with time passed in. Owned by a run's RunState; one thread.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "rendezvous/rendezvous_types.hpp"

namespace cohort::rdzv {

struct Exclusion {
  std::string host;
  int failures = 0;  ///< root-cause failures that led to it
  Ms cooldown{0};
  TimePoint until;
};

class HostExclusions {
 public:
  /// `failure_limit` 0: never exclude.
  HostExclusions(int failure_limit, Ms base_cooldown);

  /// A worker failure on `host` was the root cause of a restart; an Exclusion when the count has
  /// reached the limit and the run `can_spare` the host (enough other nodes for a round).
  std::optional<Exclusion> failed(const std::string& host, TimePoint now, bool can_spare = true);
  bool excluded(const std::string& host, TimePoint now) const;
  /// The end of the host's last cooldown (over or not); nullopt for a host never excluded.
  std::optional<TimePoint> excluded_until(const std::string& host) const;

 private:
  struct Host {
    int failures = 0;  ///< since its last exclusion
    int exclusions = 0;
    TimePoint until{};
  };

  int failure_limit_;
  Ms base_cooldown_;
  std::map<std::string, Host> hosts_;
};

}  // namespace cohort::rdzv
