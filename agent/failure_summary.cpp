#include "agent/failure_summary.hpp"

#include <ctime>
#include <sstream>

#include "agent/flight_recorder_dumps.hpp"
#include "agent/hang_report.hpp"
#include "common/signal_names.hpp"
#include "common/text.hpp"

namespace cohort {
namespace {

constexpr size_t kWidth = 60;

std::string format_time(std::chrono::system_clock::time_point time) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm local{};
  ::localtime_r(&seconds, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d_%H:%M:%S", &local);
  return text;
}

std::string indent(const std::string& text, const std::string& pad) {
  std::string out;
  std::istringstream lines(text);
  std::string line;
  bool first = true;
  while (std::getline(lines, line)) {
    if (!first) out += "\n" + pad;
    out += line;
    first = false;
  }
  return out;
}

std::string error_file_line(const WorkerFailure& failure) {
  if (!failure.error_file_written) return "<N/A>";
  if (failure.error_file_kept) return failure.error_file;
  return failure.error_file + " (removed at exit; --log-dir keeps it)";
}

std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of("\n");
  if (end == std::string::npos) return {};
  size_t newline = text.find_last_of('\n', end);
  size_t from = newline == std::string::npos ? 0 : newline + 1;
  return text.substr(from, end + 1 - from);
}

// An uncaught Python exception prints the traceback the error file holds to stderr as well, and
// a hung Python worker's stacks end with the frames quoted as "hung in": the summary quotes them
// once.
bool stderr_repeats_traceback(const WorkerFailure& failure) {
  if (failure.stderr_tail.empty()) return false;
  std::string_view last = trim(failure.stderr_tail.back());
  if (!failure.traceback.empty() && last == trim(last_line(failure.traceback))) return true;
  return failure.hang && !failure.hang->frames.empty() && last == trim(failure.hang->frames.back());
}

// Why cohort stopped this worker itself (a hang, and where it was stuck; an expired timer), or
// that it failed while starting.
void append_hang(std::ostringstream& out, const WorkerFailure& failure) {
  if (!failure.timer_expired.empty()) out << "  timer     : " << failure.timer_expired << "\n";
  if (failure.startup_failure) {
    out << "  start-up  : failed " << failure.uptime.count() / 1000.0
        << " s after it started (within --min-uptime): a start-up failure\n";
  }
  if (!failure.hang) return;
  const HangReport& hang = *failure.hang;
  out << "  hang      : " << hang_line(failure, hang) << "\n";
  for (size_t i = 0; i < hang.frames.size(); ++i)
    out << (i == 0 ? "  hung in   : " : "              ") << hang.frames[i] << "\n";
  if (!hang.stacks_file.empty()) out << "  stacks    : " << hang.stacks_file << "\n";
  if (!hang.note.empty()) out << "  stacks    : " << hang.note << "\n";
  for (const auto& dump : hang.dumps)
    out << "  nccl dump : " << dump_line(dump, hang.dump_wait, hang.dumps_kept) << "\n";
}

void append_entry(std::ostringstream& out, size_t index, const std::string& host,
                  const WorkerFailure& failure) {
  const ExitStatus& status = failure.status;
  out << "[" << index << "]:\n";
  out << "  time      : " << format_time(failure.time) << "\n";
  out << "  host      : " << host << "\n";
  out << "  rank      : " << failure.rank << " (local_rank: " << failure.local_rank << ")\n";
  if (status.signaled) {
    out << "  exitcode  : " << -status.signal << " (pid: " << failure.pid << ")\n";
    out << "  signal    : " << signal_name(status.signal) << "\n";
  } else {
    out << "  exitcode  : " << status.code << " (pid: " << failure.pid << ")\n";
  }
  out << "  error_file: " << error_file_line(failure) << "\n";
  const std::string pad = "              ";
  if (!failure.error_message.empty()) {
    out << "  error     : " << indent(failure.error_message, pad) << "\n";
  }
  if (!failure.traceback.empty()) {
    out << "  traceback : " << indent(failure.traceback, pad) << "\n";
  } else if (status.signaled) {
    out << "  traceback : Signal " << status.signal << " (" << signal_name(status.signal)
        << ") received by PID " << failure.pid << "\n";
  } else {
    out << "  traceback : <none: the worker wrote no error file>\n";
  }
  if (failure.after_stop) {
    out << "  note      : it exited with this code after cohort asked it to stop: maybe a "
           "failure of its own, maybe its way of stopping\n";
  }
  if (!failure.files_cut.empty()) out << "  note      : " << failure.files_cut << "\n";
  append_hang(out, failure);
  if (stderr_repeats_traceback(failure)) {
    out << "  stderr    : (ends with the frames above)\n";
  } else if (!failure.stderr_tail.empty()) {
    out << "  stderr    : (last " << failure.stderr_tail.size() << " lines)\n";
    for (const auto& line : failure.stderr_tail) out << "    " << line << "\n";
  }
}

}  // namespace

size_t root_cause_index(const std::vector<WorkerFailure>& failures) {
  size_t best = 0;
  for (size_t i = 1; i < failures.size(); ++i) {
    if (failures[i].time < failures[best].time) best = i;
  }
  return best;
}

std::string format_failure_summary(const std::string& title, const std::string& host,
                                   const std::vector<WorkerFailure>& failures) {
  const std::string heavy(kWidth, '='), light(kWidth, '-');
  std::ostringstream out;
  out << heavy << "\n" << title << " FAILED\n" << light << "\nFailures:\n";
  size_t root = failures.empty() ? 0 : root_cause_index(failures);
  size_t index = 1;
  for (size_t i = 0; i < failures.size(); ++i) {
    if (i != root) append_entry(out, index++, host, failures[i]);
  }
  if (failures.size() <= 1) out << "  <NO_OTHER_FAILURES>\n";
  out << light << "\nRoot Cause (first observed failure):\n";
  if (!failures.empty()) append_entry(out, 0, host, failures[root]);
  out << heavy << "\n";
  return out.str();
}

}  // namespace cohort
