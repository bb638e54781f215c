// A host's earlier agent of the same `cohort launch`. When the launch starts a lost host's agent
// again (--host-retries), the agent it lost may still be running there: only its ssh connection
// died (a firewall dropped it, or the network was cut long enough for ssh to give up, and the
// remote sshd never heard). The new agent stops it before anything else, so that a host never has
// two agents, and two sets of workers on its GPUs, in one run. Matching is pure; the rest reads
// /proc and signals. Main thread, before the agent's io loop starts.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace cohort {

/// A process as the search sees it: who it is, its parent, its owner and its command line.
struct ProcessLine {
  pid_t pid = -1;
  pid_t ppid = -1;
  uid_t uid = 0;
  std::vector<std::string> argv;
};

/// Whether `other` was started by the same launch for the same host as `mine`: both are
/// `cohort run --under-launch` lines, equal but for --launched-ms-ago and its value (which only
/// a host started again carries, each time another).
bool same_launched_agent(const std::vector<std::string>& mine,
                         const std::vector<std::string>& other);

/// The earlier agents among `processes` of agent `self` (whose line is `mine`, owner `uid`), and
/// their keepers (`cohort __keeper ...`, their parent an earlier agent).
/// Never `self` or what `self` started.
struct EarlierAgents {
  std::vector<pid_t> agents;
  std::vector<pid_t> keepers;
};
EarlierAgents find_earlier_agents(const std::vector<ProcessLine>& processes, pid_t self, uid_t uid,
                                  const std::vector<std::string>& mine);

/// Stops this host's earlier agents of the same launch: SIGTERM (each stops its workers within
/// its --shutdown-timeout and exits), SIGKILL for one still running after `patience` (its keeper
/// then kills its workers), then waits a little for their keepers. Says what it does on stderr.
/// Returns how many agents it found.
size_t stop_earlier_agents(std::chrono::milliseconds patience);

}  // namespace cohort
