// cohort's own exit codes, for what is not a worker's status. A failed run exits with the
// root-cause worker's exit code, or 128 + signal; a run stopped by a signal exits 128 + signal.
#pragma once

namespace cohort {

constexpr int kExitSuccess = 0;
constexpr int kExitInternal = 1;     ///< cohort itself could not continue (see its message)
constexpr int kExitUsage = 2;        ///< a bad flag or value; nothing was started
constexpr int kExitRendezvous = 3;   ///< the rendezvous failed: join timeout, settings mismatch,
                                     ///< daemon unreachable
constexpr int kExitUnreachable = 4;  ///< cohort launch: a host did not answer over ssh, or was
                                     ///< lost and the run could not go on without it
constexpr int kExitNotFound = 127;   ///< the training script or binary does not exist
constexpr int kExitStopped = 130;    ///< the run was stopped from outside (`cohort stop`): the
                                     ///< status of a Ctrl-C, 128 + SIGINT

}  // namespace cohort
