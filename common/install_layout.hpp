// Where cohort finds what it ships beside its binaries, relative to its own executable, so that
// an install under any prefix, an unpacked tarball or the build tree works wherever it lies:
// <prefix>/bin/cohort and <prefix>/share/cohort/python/cohort_heartbeat.py (the build tree has
// the same layout: build/bin, build/share). Free functions; any thread.
#pragma once

#include <string>

namespace cohort {

/// The directory of the running executable (/proc/self/exe, symlinks resolved); empty when it
/// cannot be read.
std::string own_executable_dir();

/// Where the Python heartbeat module lies for an executable in `bin_dir`:
/// `bin_dir`/../share/cohort/python (pure).
std::string python_module_dir_for(const std::string& bin_dir);

/// The running cohort's Python module directory, when cohort_heartbeat.py is there; else empty.
std::string installed_python_module_dir();

}  // namespace cohort
