// The token of a Slurm job when none is given: derived from a per-user secret in the user's
// home directory (created once, readable by the user only) and the job id, so every node of the
// job computes the same token and no other user, nor another job's token holder, can. Main
// thread, at start.
#pragma once

#include <map>
#include <string>

#include "launcher/tokens/token_source.hpp"

namespace cohort {

/// Inside a Slurm job (SLURM_JOB_ID set) without a token: the job's derived token, reading (or
/// creating) `$HOME/.cohort/secret`. Outside Slurm: no token and no error.
TokenResult slurm_job_token(const std::map<std::string, std::string>& env);

}  // namespace cohort
