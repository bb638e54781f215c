// `cohort stop --rdzv-endpoint H:P --rdzv-id ID [--reason TEXT]`: ends a run cleanly from
// anywhere. The daemon tells every node to stop (each agent stops its workers with the grace
// period and exits 130) and records run.stopped. Proves the daemon's or the run's token when
// one is configured. Blocking; main thread.
#pragma once

#include <string>

#include "launcher/options/cli_fwd.hpp"

namespace cohort {

struct StopQuery {
  std::string endpoint = "127.0.0.1:29400";
  std::string run_id;
  std::string fallbacks;  ///< --rdzv-fallback: where the run may have moved
  std::string reason;
  std::string token_file;
  std::string token;  ///< loaded from token_file, $COHORT_TOKEN or Slurm's job token
  std::string by;     ///< "user@host": who asks (stop_requester())
  int timeout_ms = 5000;
};

void add_stop_flags(CLI::App& app, StopQuery& query);
/// "user@host" of this process: the login name ($USER, else the password entry, else the uid)
/// and the host name, cut to what a stop request carries.
std::string stop_requester();
int run_stop_command(const StopQuery& query);

}  // namespace cohort
