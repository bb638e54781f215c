// Formats the one failure summary cohort prints when a run fails for good: torchrun's framed
// block (title, other failures, root cause) plus the worker's exit code or signal name, its
// error-file traceback and the last lines of its stderr. Pure; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/worker_failure.hpp"

namespace cohort {

/// The line torchrun prints above the summary (its exception's, without the traceback), which
/// tools that read training logs look for.
inline constexpr std::string_view kChildFailedLine =
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ";

/// Index of the root cause: the failure with the earliest time (ties: first in the list).
size_t root_cause_index(const std::vector<WorkerFailure>& failures);

std::string format_failure_summary(const std::string& title, const std::string& host,
                                   const std::vector<WorkerFailure>& failures);

}  // namespace cohort
