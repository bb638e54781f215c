// The shared-secret proofs of the control protocol's handshake: HMAC-SHA256 over a challenge
// and the identity a peer claims, so that a peer shows it holds the run's token without the
// token crossing the wire, and comparisons that take the same time whatever the bytes.
// Pure except random_nonce (the kernel's random bytes, common/random_bits.hpp); any thread.
#pragma once

#include <string>
#include <string_view>

namespace cohort::proto {

/// Tokens shorter than this are refused: a guessable secret protects nothing.
constexpr size_t kMinTokenBytes = 16;

/// HMAC-SHA256 of `message` under `key`, as 64 lowercase hex digits.
std::string hmac_sha256_hex(std::string_view key, std::string_view message);

/// True when `a` and `b` are equal, in time that depends only on their lengths.
bool proofs_equal(std::string_view a, std::string_view b);

/// `bytes` random bytes as lowercase hex (a challenge, or a generated token).
std::string random_nonce(size_t bytes = 32);

/// What an agent's hello proves: it holds `key` (the daemon's or the run's token), answering
/// this connection's `challenge`, for this run and node.
std::string hello_proof(std::string_view key, std::string_view challenge,
                        std::string_view client_nonce, std::string_view run_id,
                        std::string_view node_id);
/// What the daemon's welcome proves back: it holds `key` too, answering the agent's nonce.
std::string welcome_proof(std::string_view key, std::string_view challenge,
                          std::string_view client_nonce);
/// What a status request proves, for one run (`run_id`) or, under the daemon's token, all.
std::string status_proof(std::string_view key, std::string_view challenge, std::string_view run_id);
/// What an events request proves, for one run.
std::string events_proof(std::string_view key, std::string_view challenge, std::string_view run_id);
/// What a stop request proves: the right to end run `run_id`, for this reason, asked by `by`
/// (covered only when not empty, so a request without it proves what it always did).
std::string stop_proof(std::string_view key, std::string_view challenge, std::string_view run_id,
                       std::string_view reason, std::string_view by = {});

/// SHA-256 of `data`, as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

/// What the daemon's answer to a status, events or stop request (`kind`: "status", "events",
/// "stop") proves back: it holds `key` too, answering the tool's nonce on this connection, and it
/// said this answer (`answer_digest`: see proto::answer_digest), so that no relay can change it.
std::string answer_proof(std::string_view key, std::string_view kind, std::string_view challenge,
                         std::string_view client_nonce, std::string_view run_id,
                         std::string_view answer_digest);

/// The token of run `run_id` under a daemon's token: whoever holds the daemon's token can hand
/// a team the token of its run, which proves nothing about any other run.
std::string derive_run_token(std::string_view daemon_token, std::string_view run_id);

}  // namespace cohort::proto
