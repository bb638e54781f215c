// Run ids (--rdzv-id, PET_RDZV_ID, Slurm's slurm-<job>.<step>, cohort launch's launch-<uuid>):
// what the launcher accepts, what a daemon should accept in a hello, and how one becomes a safe
// directory name for the logs. Pure functions, safe on any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cohort {

/// The run id of a run started without --rdzv-id (torchrun's default).
inline constexpr char kDefaultRunId[] = "none";

/// The longest run id accepted (a uuid is 36 characters, slurm-<job>.<step> about 20).
constexpr size_t kMaxRunIdLength = 128;

/// Why `id` is not a run id, or an empty string when it is one. A run id is 1 to
/// kMaxRunIdLength characters from [A-Za-z0-9._:@-] and does not start with '.' (so neither "."
/// nor ".." nor a hidden name): it is always one plain path component.
std::string run_id_problem(std::string_view id);

/// `id` as one path component that stays inside its parent: a valid id unchanged; otherwise
/// every character outside the run id alphabet, and a leading '.', becomes '_', the result is cut
/// to kMaxRunIdLength, and an empty id becomes "_".
std::string run_id_path_component(std::string_view id);

}  // namespace cohort
