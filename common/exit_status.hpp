// How a process ended (exit code or signal), decoded once from a wait status, and the one place
// that maps it to cohort's own exit code (code, or 128 + signal). Plain value type.
#pragma once

#include <iosfwd>
#include <string>

namespace cohort {

struct ExitStatus {
  bool signaled = false;
  int code = 0;    ///< exit code when !signaled
  int signal = 0;  ///< terminating signal when signaled

  static ExitStatus from_wait_status(int wait_status);
  static ExitStatus exited(int code) { return {false, code, 0}; }
  static ExitStatus killed_by(int signal) { return {true, 0, signal}; }

  bool success() const { return !signaled && code == 0; }
  /// The status a shell would report: the code, or 128 + signal.
  int shell_code() const { return signaled ? 128 + signal : code; }
  /// "exit code 7" or "signal 11 (SIGSEGV)".
  std::string describe() const;

  bool operator==(const ExitStatus&) const = default;
};

/// Prints describe(), so that a failed comparison in a test says which status it saw.
std::ostream& operator<<(std::ostream& out, const ExitStatus& status);

}  // namespace cohort
