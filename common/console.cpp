#include "common/console.hpp"

#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <thread>

#include "common/signal_blocking.hpp"

namespace cohort::console {
namespace {

// Consecutive writes to one descriptor are joined up to this size, so that a burst of short
// lines costs one write(2), not one each.
constexpr size_t kChunkBytes = 256 * 1024;

// write(2) until all of `bytes` is out, waiting on a non-blocking descriptor; an error (the
// console is gone: EPIPE) drops the rest.
void write_fully(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t wrote = ::write(fd, bytes.data(), bytes.size());
    if (wrote >= 0) {
      bytes.remove_prefix(static_cast<size_t>(wrote));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd ready{fd, POLLOUT, 0};
      ::poll(&ready, 1, 1000);
    } else if (errno != EINTR) {
      return;
    }
  }
}

// The queue and its writer thread. Made once and never destroyed: the thread may still be
// blocked in write(2) when the process exits. A child forked without exec (the group keeper)
// starts with an empty queue and a writer of its own at its first write.
class Writer {
 public:
  static Writer& instance() {
    static Writer* writer = new Writer;
    return *writer;
  }

  Writer() {
    ::pthread_atfork([] { instance().mutex_.lock(); }, [] { instance().mutex_.unlock(); },
                     [] { instance().forget_parent(); });
  }

  void push(int fd, std::string_view bytes, bool droppable) {
    if (bytes.empty()) return;
    std::lock_guard lock(mutex_);
    if (droppable && queued_ + bytes.size() > kMaxQueuedBytes) {
      ++dropped_;
      dropped_fd_ = fd;
      return;
    }
    start_once();
    if (!chunks_.empty() && chunks_.back().fd == fd &&
        chunks_.back().bytes.size() + bytes.size() <= kChunkBytes) {
      chunks_.back().bytes.append(bytes);
    } else {
      chunks_.push_back({fd, std::string(bytes)});
    }
    queued_ += bytes.size();
    has_work_.notify_one();
  }

  size_t queued() {
    std::lock_guard lock(mutex_);
    return queued_;
  }

  bool drain(std::chrono::milliseconds within) {
    std::unique_lock lock(mutex_);
    return idle_.wait_for(lock, within, [this] { return queued_ == 0; });
  }

 private:
  struct Chunk {
    int fd;
    std::string bytes;
  };

  // In the child of a fork, with the mutex held since the fork: what is queued is the parent's
  // to write, and the writer thread did not come along (made afresh, the condition variables
  // forget it was waiting on them).
  void forget_parent() {
    new (&has_work_) std::condition_variable;
    new (&idle_) std::condition_variable;
    chunks_.clear();
    queued_ = 0;
    dropped_ = 0;
    started_ = false;
    running_ = false;
    mutex_.unlock();
  }

  // Returns once the thread runs: it then blocks on the mutex (held by push()), so a fork that
  // follows (the group keeper's, without exec) finds it holding nothing, neither in its start-up
  // (a sanitizer's allocator locks) nor after: everything it allocates or frees is under the
  // mutex, which the fork handlers take.
  void start_once() {
    if (started_) return;
    started_ = true;
    cohort::SignalsBlocked for_the_thread;  // the process takes its signals on the main thread
    std::thread([this] {
      running_ = true;
      running_.notify_one();
      run();
    }).detach();
    running_.wait(false);
    if (exit_hooked_) return;  // a forked child keeps its parent's
    exit_hooked_ = true;
    std::atexit([] { Writer::instance().drain(kExitDrain); });
  }

  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      has_work_.wait(lock, [this] { return !chunks_.empty(); });
      Chunk chunk = std::move(chunks_.front());
      chunks_.pop_front();
      lock.unlock();
      write_fully(chunk.fd, chunk.bytes);
      lock.lock();
      queued_ -= chunk.bytes.size();
      if (chunks_.empty() && dropped_ > 0) note_dropped();
      if (queued_ == 0) idle_.notify_all();
    }
  }

  // Called with the console caught up again: says what was lost while it did not read.
  void note_dropped() {
    std::string note =
        "cohort warning: the console did not read for a while: " + std::to_string(dropped_) +
        " of cohort's messages were dropped\n";
    dropped_ = 0;
    queued_ += note.size();
    chunks_.push_back({dropped_fd_, std::move(note)});
  }

  std::mutex mutex_;
  std::condition_variable has_work_;
  std::condition_variable idle_;
  std::deque<Chunk> chunks_;
  size_t queued_ = 0;  ///< bytes in chunks_ and in the chunk being written
  size_t dropped_ = 0;
  int dropped_fd_ = STDERR_FILENO;  ///< where the last dropped message was going
  bool started_ = false;
  std::atomic<bool> running_ = false;  ///< the writer thread has started (start_once waits for it)
  bool exit_hooked_ = false;
};

}  // namespace

void write_message(int fd, std::string_view bytes) { Writer::instance().push(fd, bytes, true); }

void write_output(int fd, std::string_view bytes) { Writer::instance().push(fd, bytes, false); }

size_t queued_bytes() { return Writer::instance().queued(); }

bool drain(std::chrono::milliseconds within) { return Writer::instance().drain(within); }

}  // namespace cohort::console
