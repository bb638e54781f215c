// How a rendezvous daemon is set up: where it listens, its secret, what its worker stores may
// hold, how long strangers and slow readers may take, its HTTP port and event log. Filled in by
// `cohortd`'s flags or by the launcher that embeds the daemon (main thread), then copied into the
// RendezvousDaemon (rendezvous/daemon.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/connection_gate.hpp"
#include "proto/control_messages.hpp"
#include "store/tcpstore_limits.hpp"

namespace cohort {

class IoPool;

struct DaemonOptions {
  std::string address = "0.0.0.0";  ///< where agents connect; "::" for dual-stack
  uint16_t port = 29400;            ///< 0: any free port
  uint16_t store_port_min = 0;      ///< worker store ports: 0 = any free port,
  uint16_t store_port_max = 0;      ///< or the first free one in [min, max]
  /// The daemon's shared secret: every hello and status request must prove it holds this token
  /// or the run's token derived from it (proto/auth.hpp). Empty: no authentication.
  std::string token;
  uint64_t store_quota_bytes = kStoreDefaultQuotaBytes;  ///< each round's worker store
  /// What all the daemon's worker stores may hold together (ByteBudget).
  uint64_t store_budget_bytes = kStoreDefaultBudgetBytes;
  /// How long a new connection has for its hello or status request before it is closed.
  std::chrono::milliseconds hello_timeout{10000};
  /// The caps on connections that have not proven themselves; each has 2 s after its challenge
  /// before a newcomer may evict it (common/connection_gate.hpp).
  ConnectionLimits connection_limits{64, 1024, 16384, std::chrono::milliseconds(2000)};
  /// The most nodes a status reply (and /api/runs, the runs page) lists; the rest are counted.
  int status_node_limit = proto::kMaxStatusNodes;
  /// How long a status or events reply may wait for its reader before its connection closes,
  /// and how many bytes of such replies may wait, all connections together: past it the next
  /// such request is answered "busy".
  std::chrono::milliseconds reply_read_timeout{30000};
  size_t max_pending_reply_bytes = size_t{256} << 20;
  /// The HTTP port (/metrics, the runs and timeline pages): -1 none, 0 any free port. Requests
  /// must carry the token as a bearer token when there is one, on loopback too.
  int http_port = -1;
  std::string http_address = "127.0.0.1";
  /// Appends every event (docs/EVENTS.md) to this file; "" none. The daemon keeps each run's
  /// recent events in memory either way (the timeline pages, `cohort status --events`).
  std::string event_log;
  /// The io threads each round's worker store spreads its connections over (see
  /// StoreServerOptions::io_pool); nullptr: this daemon's own thread serves them.
  IoPool* store_pool = nullptr;
  /// Hosted by a `cohort run` agent, and so gone for good when it is (told in the welcome: its
  /// agents may move to a --rdzv-fallback as soon as its port refuses them).
  bool agent_hosted = false;
};

/// The shortest heartbeat timeout a run may ask for (the launcher's floor, checked again here).
constexpr int64_t kMinHeartbeatTimeoutMs = 200;

}  // namespace cohort
