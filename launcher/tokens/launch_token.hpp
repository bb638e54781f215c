// The handshake of `cohort launch` with each host's `cohort run --under-launch`, over the one
// ssh session (or srun step) that carries the agent: the agent first says on stdout that it
// started ("cohort-ready <its --version>\n"), then waits for the run's token as the first line of
// its stdin ("token <hex>\n"), which the launch writes once every host said it is ready, followed
// by the forwarded variables whose names say they hold secrets ("env NAME=<hex> ...\n"). The
// token is the user's (--token-file, COHORT_TOKEN) or a fresh random one, never on a command line
// or in an environment; the secrets are never on a command line either (`ps` on any host would
// show them). Main thread, at start.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

/// Forwarded variables that travel over stdin: name, value.
using SecretVariables = std::vector<std::pair<std::string, std::string>>;

/// The longest secrets line, its newline included: it must fit in a pipe's buffer with the token
/// line (the launch writes both at once, before the host reads them).
constexpr size_t kMaxSecretsLineBytes = 32 * 1024;

/// A variable name that says it holds a secret: it contains TOKEN, SECRET, PASSWORD, PASSWD, KEY
/// or CREDENTIAL, in any case (HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY).
bool secret_variable_name(std::string_view name);

/// The line after the token line: "env", then " NAME=<value in hex>" for each of `secrets`.
std::string secrets_line(const SecretVariables& secrets);

struct SecretsResult {
  SecretVariables variables;
  std::string error;  ///< non-empty: the line is not one secrets_line writes, or did not come
};

/// The variables of one line as secrets_line writes it (without its newline).
SecretsResult parse_secrets_line(std::string_view line);

/// Reads the line after the token line, as read_token_line reads that one.
SecretsResult read_secrets_line(int fd, std::chrono::milliseconds limit = kTokenLineTimeout);

}  // namespace cohort
