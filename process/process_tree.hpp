// What /proc says about processes (pid, state, parent, group, session, start time) and killing
// whole subtrees however their processes detached (setsid, double fork): every process is
// stopped before its children are looked for, so that none can fork past the walk, and only
// then are all SIGKILLed. Parsing is pure; the rest reads /proc. Used by the ChildReaper (the
// orphans a subreaper inherits) and the GroupKeeper (what the agent leaves when it dies or
// stops); any thread, no state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace cohort {

struct ProcStat {
  pid_t pid = -1;
  char state = '?';  ///< R, S, D, T, Z, X, ...
  pid_t ppid = -1;
  pid_t pgid = -1;
  pid_t session = -1;
  uint64_t start_time = 0;  ///< clock ticks after boot: tells a pid's reuse from its first owner
};

/// Parses one /proc/<pid>/stat line ("pid (comm) state ppid pgrp session ... starttime ...");
/// the command name may hold spaces and parentheses. nullopt when the text is not such a line.
std::optional<ProcStat> parse_proc_stat(std::string_view text);

/// The processes of `table` below `roots` (children, their children, ...), parents before their
/// children, without the roots themselves; `spared` and everything below it are left out.
std::vector<pid_t> descendants(const std::vector<ProcStat>& table, const std::vector<pid_t>& roots,
                               pid_t spared = -1);

/// The children of `pid` (those of each of its threads), from /proc/<pid>/task/*/children: a few
/// small reads, however many processes the machine runs. nullopt on a kernel without those files
/// (built without CONFIG_PROC_CHILDREN); empty when `pid` is gone. A child forked or re-parented
/// during the read may be missing, as in a scan.
std::optional<std::vector<pid_t>> read_children(pid_t pid);

/// The children of `parent` now: read_children, or on a kernel without it one scan of /proc.
std::vector<pid_t> children_now(pid_t parent);

/// What is below `roots` now, as descendants() lists it: walked down with read_children (one read
/// per process below, per thread), or on a kernel without it from one scan of /proc.
std::vector<pid_t> descendants_now(const std::vector<pid_t>& roots, pid_t spared = -1);

/// /proc/<pid>/stat, or nullopt when that process is gone.
std::optional<ProcStat> read_proc_stat(pid_t pid);

/// Every process of this pid namespace, from one scan of /proc (a process that exits during the
/// scan may be missing).
std::vector<ProcStat> scan_processes();

/// SIGSTOPs each root, then whatever is below the stopped processes (looking again until nothing
/// new turns up), then SIGKILLs all of them. `spared` and its descendants are left
/// alone. Returns how many processes were killed.
size_t kill_trees(const std::vector<pid_t>& roots, pid_t spared = -1);

}  // namespace cohort
