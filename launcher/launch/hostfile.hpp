// The hosts of `cohort launch` and their slots: MPI/DeepSpeed hostfiles ("node1 slots=4",
// comments, blank lines), `-H node1:4,node2` lists, and DeepSpeed's --include/--exclude filters
// ("node1:0,2@node2"). A host's slots become its worker count; a host whose slots were filtered
// also gets the CUDA_VISIBLE_DEVICES of the slots it kept. Pure; any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace cohort {

struct HostSlots {
  std::string name;
  int slots = 1;  ///< slots the hostfile or -H gave (1 when none)
  bool slots_given = false;
  std::vector<int> kept;  ///< after --include/--exclude: the slots left, in order; empty: all
  /// The worker count on this host: the kept slots, or all of them.
  int workers() const { return kept.empty() ? slots : static_cast<int>(kept.size()); }
  /// The name without "user@": what --include/--exclude name and the host's lines carry.
  std::string address() const { return name.substr(name.find('@') + 1); }
};

struct HostSelection {
  std::vector<HostSlots> hosts;
  std::vector<std::string> problems;  ///< each names its flag or "FILE:LINE"
};

/// A hostfile's text; `origin` names it in problems ("hosts.txt:3: ..."). Duplicate hosts,
/// unknown fields and bad slot counts are problems. "max_slots=N" alone gives N slots (Open
/// MPI); with slots= it only bounds them. "slots = 4" is "slots=4"; a UTF-8 BOM is skipped.
HostSelection parse_hostfile(const std::string& text, const std::string& origin);

/// "-H node1:4,node2,[fe80::1]:2" (slots 1 when not given; an IPv6 address with slots goes in
/// brackets, as it may in a hostfile and in --include/--exclude).
HostSelection parse_host_list(const std::string& text);

/// Hosts and their slot counts from a scheduler's allocation, in order, each name checked as a
/// hostfile's is; `origin` names the source in problems, `slots_origin` (when not empty) the
/// source of the slot counts where another variable gave them (Slurm's SLURM_TASKS_PER_NODE).
HostSelection counted_hosts(const std::vector<std::pair<std::string, int>>& hosts,
                            const std::string& origin, const std::string& slots_origin = "");

/// Applies --include (keep only these hosts/slots) or --exclude (drop these hosts/slots), in
/// DeepSpeed's form "host[:slot,slot]@host2". Unknown hosts, slots out of range and a host left
/// without slots are problems. Giving both flags is a problem.
void filter_hosts(HostSelection& selection, const std::string& include, const std::string& exclude);

/// Whether `address` (a host's name without "user@") is this machine to itself only:
/// localhost, 127.x.y.z or ::1.
bool is_loopback_host(const std::string& address);

/// Whether `address` names this machine as every machine names itself: localhost, 127.0.0.1 or
/// ::1 (not another loopback address, which a test or a container may give a host of its own).
bool names_this_machine(const std::string& address);

/// "0,2,3": the CUDA_VISIBLE_DEVICES of a filtered host; empty when it kept all its slots.
std::string visible_devices(const HostSlots& host);

}  // namespace cohort
