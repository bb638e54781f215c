#include "common/untrusted_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cohort {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  return "not a plain file";
}

// Reads up to `max_bytes` from `offset`; the file is open and known to be regular.
UntrustedRead read_from(int fd, off_t offset, size_t max_bytes, size_t file_bytes) {
  UntrustedRead read;
  read.file_bytes = file_bytes;
  read.bytes.resize(std::min(max_bytes, file_bytes));
  size_t got = 0;
  while (got < read.bytes.size()) {
    ssize_t n = ::pread(fd, read.bytes.data() + got, read.bytes.size() - got,
                        offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      read.error = std::strerror(errno);
      return read;
    }
    if (n == 0) break;  // it shrank meanwhile
    got += static_cast<size_t>(n);
  }
  read.bytes.resize(got);
  read.ok = true;
  return read;
}

UntrustedRead read_part(const std::string& path, size_t max_bytes, bool tail) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return {false, {}, std::strerror(errno), 0};
  struct stat status {};
  UntrustedRead read;
  if (::fstat(fd, &status) != 0) {
    read.error = std::strerror(errno);
  } else if (!S_ISREG(status.st_mode)) {
    read.error = std::string("not a regular file (") + kind_of(status.st_mode) + ")";
  } else {
    size_t size = static_cast<size_t>(status.st_size);
    off_t offset = tail && size > max_bytes ? static_cast<off_t>(size - max_bytes) : 0;
    read = read_from(fd, offset, max_bytes, size);
  }
  ::close(fd);
  return read;
}

}  // namespace

int open_untrusted_for_writing(const std::string& path, int flags) {
  int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | flags, 0644);
  if (fd < 0) return -1;
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(fd);
    errno = EINVAL;
    return -1;
  }
  // Back to blocking writes: a regular file never waits, and whoever gets the descriptor (a
  // worker's stdout) must not see EAGAIN.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

bool write_untrusted_file(const std::string& path, const std::string& text, int flags) {
  int fd = open_untrusted_for_writing(path, flags);
  if (fd < 0) return false;
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  ::close(fd);
  return written == text.size();
}

UntrustedRead read_untrusted_file(const std::string& path, size_t max_bytes) {
  return read_part(path, max_bytes, false);
}

UntrustedRead read_untrusted_file_tail(const std::string& path, size_t max_bytes) {
  return read_part(path, max_bytes, true);
}

}  // namespace cohort
