// Signal names and numbers, both ways ("SIGTERM" <-> 15), for flags, summaries and messages.
// Pure functions, safe on any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cohort {

/// "SIGSEGV" for 11; "SIG<n>" for a number without a name.
std::string signal_name(int signal);

/// Accepts "SIGUSR1", "USR1", "sigusr1" and "10"; nullopt for anything else.
std::optional<int> parse_signal(std::string_view text);

/// True for the signals that end a run when cohort receives them (INT, TERM, HUP, QUIT).
bool is_termination_signal(int signal);

}  // namespace cohort
