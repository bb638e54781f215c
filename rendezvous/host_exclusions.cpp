#include "rendezvous/host_exclusions.hpp"

#include <algorithm>

namespace cohort::rdzv {
namespace {

constexpr Ms kMaxCooldown = std::chrono::hours(24);

Ms doubled(Ms base, int times) {
  Ms cooldown = base;
  for (int i = 0; i < times && cooldown < kMaxCooldown; ++i) cooldown *= 2;
  return std::min(cooldown, kMaxCooldown);
}

}  // namespace

HostExclusions::HostExclusions(int failure_limit, Ms base_cooldown)
    : failure_limit_(failure_limit), base_cooldown_(base_cooldown) {}

std::optional<Exclusion> HostExclusions::failed(const std::string& host, TimePoint now,
                                                bool can_spare) {
  if (failure_limit_ <= 0) return std::nullopt;
  Host& counted = hosts_[host];
  if (++counted.failures < failure_limit_ || !can_spare) return std::nullopt;
  Exclusion exclusion{host, counted.failures, doubled(base_cooldown_, counted.exclusions), now};
  exclusion.until = now + exclusion.cooldown;
  counted.failures = 0;
  ++counted.exclusions;
  counted.until = exclusion.until;
  return exclusion;
}

bool HostExclusions::excluded(const std::string& host, TimePoint now) const {
  auto found = hosts_.find(host);
  return found != hosts_.end() && now < found->second.until;
}

std::optional<TimePoint> HostExclusions::excluded_until(const std::string& host) const {
  auto found = hosts_.find(host);
  if (found == hosts_.end() || found->second.exclusions == 0) return std::nullopt;
  return found->second.until;
}

}  // namespace cohort::rdzv
