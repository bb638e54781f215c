// The handshake of `cohort launch` with each host's `cohort run --under-launch`, over the one
// ssh session (or srun step) that carries the agent: the agent first says on stdout that it
// started ("cohort-ready <its --version>\n"), then waits for the run's token as the first line of
// its stdin ("token <hex>\n"), which the launch writes once every host said it is ready. The
// token is the user's (--token-file, COHORT_TOKEN) or a fresh random one, never on a command line
// or in an environment. Main thread, at start.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>

#include "launcher/tokens/token_source.hpp"

namespace cohort {

/// How long a launched agent waits for its token line before giving up, unless the launch says
/// (--token-wait-ms: it waits for every host to be ready first).
constexpr std::chrono::seconds kTokenLineTimeout{10};

/// What starts the line a launched agent writes first on stdout.
constexpr std::string_view kReadyPrefix = "cohort-ready ";

/// The agent's first line on stdout: kReadyPrefix, `version` (its --version), a newline.
std::string ready_line(const std::string& version);

/// The launch's token: the user's as is (`token_file`, else `env`'s COHORT_TOKEN); else, when
/// the launch hosts the rendezvous itself, 32 fresh random bytes in hex; else (a running cohortd
/// given by --rdzv-endpoint, whose token only the user knows) none.
TokenResult launch_token(const std::string& token_file,
                         const std::map<std::string, std::string>& env, bool hosts_daemon);

/// "token <the token's bytes in hex>\n", or "token none\n" when there is no token.
std::string token_line(const std::string& token);

/// The token of one line as token_line writes it (without its newline), or why it is not one.
TokenResult parse_token_line(std::string_view line);

/// Reads the first line of `fd` (a byte at a time: nothing after the newline is consumed, so
/// the end of stdin can still be watched later) within `limit`, and parses it. Errors name
/// --under-launch and say what did not come.
TokenResult read_token_line(int fd, std::chrono::milliseconds limit = kTokenLineTimeout);

}  // namespace cohort
