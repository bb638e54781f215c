// `cohort stop --rdzv-endpoint H:P --rdzv-id ID [--reason TEXT]`: ends a run cleanly from
// anywhere. The daemon tells every node to stop (each agent stops its workers with the grace
// period and exits 130) and records run.stopped. Proves the daemon's or the run's token when
// one is configured. Blocking; main thread.
#pragma once

#include <string>
#include <string_view>

#include "launcher/options/cli_fwd.hpp"
#include "proto/control_messages.hpp"

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
/// "user@host" as a stop request carries it: invalid UTF-8 replaced as the encoder replaces it,
/// then cut to kMaxStopByBytes at the start of a character.
std::string stop_requester_text(std::string_view user, std::string_view host);
/// stop_requester_text of this process: the login name ($USER, else the password entry, else the
/// uid) and the host name.
std::string stop_requester();
/// The request `query` sends on a connection whose challenge is `challenge`: reason and by as the
/// daemon will decode them, and the proof (with a token) over exactly those.
proto::StopRunRequest stop_request(const StopQuery& query, const std::string& challenge,
                                   const std::string& client_nonce);
int run_stop_command(const StopQuery& query);

}  // namespace cohort
