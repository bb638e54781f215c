// Where a run's shared secret comes from: `--token-file PATH` (a file only its owner can read)
// or the COHORT_TOKEN variable. Checks what a secret needs (length, permissions) and says which
// source is wrong. Main thread, at start.
#pragma once

#include <cstddef>
#include <map>
#include <string>

namespace cohort {

/// Longer tokens are refused (a file of 4096 bytes is plenty for a secret).
constexpr size_t kMaxTokenBytes = 4096;

struct TokenResult {
  std::string token;  ///< empty: none configured
  std::string error;  ///< non-empty: the token source is unusable, naming the flag or variable
};

/// The token from `token_file` (if given) or else `env`'s COHORT_TOKEN, without the trailing
/// newline a file usually has.
TokenResult load_token(const std::string& token_file,
                       const std::map<std::string, std::string>& env);

}  // namespace cohort
