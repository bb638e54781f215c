// Reading a file that someone else may have written or replaced (a worker's error file, its
// stderr.log, its flight-recorder dump): only a regular file is read, never a FIFO, a device or
// a socket (the open cannot block: O_NONBLOCK, then fstat), and never more than a bound, so that
// a FIFO, /dev/zero or a sparse terabyte in its place costs nothing. Pure functions over the
// file system; any thread.
#pragma once

#include <cstddef>
#include <string>

namespace cohort {

struct UntrustedRead {
  bool ok = false;
  std::string bytes;
  std::string error;      ///< why not ok: "no such file", "not a regular file (a FIFO)", ...
  size_t file_bytes = 0;  ///< the file's size when it was read
};

/// The file's first `max_bytes` (all of it when smaller).
UntrustedRead read_untrusted_file(const std::string& path, size_t max_bytes);
/// The file's last `max_bytes` (all of it when smaller).
UntrustedRead read_untrusted_file_tail(const std::string& path, size_t max_bytes);

/// Opens `path` for writing (created 0644 if missing; `flags` adds O_APPEND or O_TRUNC), close on
/// exec, only if it is a regular file: a FIFO or a device in its place is refused (-1, errno
/// ENXIO or EINVAL) without blocking.
int open_untrusted_for_writing(const std::string& path, int flags);
/// Appends (or, with O_TRUNC, writes) `text` to a regular file at `path`; false if it is none.
bool write_untrusted_file(const std::string& path, const std::string& text, int flags);

}  // namespace cohort
