// Everything cohort shows on its own stdout and stderr (workers' lines, its messages, failure
// summaries) goes through one bounded queue and one writer thread, so that a console that stops
// reading (a terminal paused with Ctrl-S, a pipe nobody drains, a stalled ssh) blocks nothing
// but that thread: the agent keeps its heartbeats, the daemon keeps serving.
// Worker output is never dropped: its pumps read no more while the queue is backed up, and the
// workers wait in write() as they would on the console itself. cohort's own messages past
// kMaxQueuedBytes are dropped and counted; one line says how many once the console reads again.
// Safe from any thread. The writer starts with the first write; exit() waits for it to empty
// the queue, at most kExitDrain.
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

namespace cohort::console {

/// Above this, pumps stop reading until the console catches up.
inline constexpr size_t kPaceBytes = 1024 * 1024;
/// Above this, cohort's own messages are dropped (and pumps that drain an exited child wait).
inline constexpr size_t kMaxQueuedBytes = 8 * 1024 * 1024;
inline constexpr std::chrono::seconds kExitDrain{10};

/// Queues one of cohort's messages for `fd` (dropped when the queue is full).
void write_message(int fd, std::string_view bytes);
/// Queues workers' output for `fd`, whatever the queue holds; the caller paces itself with
/// queued_bytes().
void write_output(int fd, std::string_view bytes);
/// Bytes queued and not yet written.
size_t queued_bytes();
/// Waits until everything queued so far is written (or failed), at most `within`; false if
/// the console did not take it in time.
bool drain(std::chrono::milliseconds within);

}  // namespace cohort::console
