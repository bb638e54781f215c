// Why the agent's connection to the rendezvous ended, as RendezvousClient reports it next to
// the human text, so that the agent decides on the kind and never on the wording. Plain enum.
#pragma once

namespace cohort {

enum class ConnectionLoss {
  CannotReach,       ///< no connection could be made before the connect deadline
  Closed,            ///< an established connection closed (by the peer, a write error, a bad frame)
  HeartbeatTimeout,  ///< an established connection stayed silent past the heartbeat timeout
  Untrusted,         ///< the daemon broke the handshake or could not prove it holds the token
  Stalled,  ///< this process did not run past the heartbeat timeout (SIGSTOP, starvation): the
            ///< daemon has dropped this node, and its workers belong to a stale round
};

}  // namespace cohort
