// `cohort status --rdzv-endpoint H:P [--json]`: asks a rendezvous daemon what it knows (runs,
// rounds, members, restarts) and prints it. Blocking; main thread.
#pragma once

#include <string>

namespace cohort {

int run_status_command(const std::string& endpoint, bool json, int timeout_ms);

}  // namespace cohort
