// `cohort status --rdzv-endpoint H:P [--json]`: asks a rendezvous daemon what it knows (runs,
// rounds, members, restarts) and prints it. Blocking; main thread.
#pragma once

#include <ostream>
#include <string>

#include "proto/control_messages.hpp"

namespace cohort {

/// The table `cohort status` prints: one line per run, one indented line per node.
void print_status_table(const proto::StatusReply& status, std::ostream& out);

int run_status_command(const std::string& endpoint, bool json, int timeout_ms);

}  // namespace cohort
