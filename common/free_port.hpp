// Picks a TCP port that is free on an address right now, by binding port 0 and reading it back.
// Used for the classic MASTER_PORT, which worker rank 0 binds itself. Any thread.
#pragma once

#include <string>

namespace cohort {

/// 0 when no port could be bound on `address`.
int pick_free_port(const std::string& address);

}  // namespace cohort
