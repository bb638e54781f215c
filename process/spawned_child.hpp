// One child as its parent sees it: the descriptors it is given, its pid, its exit status once
// reaped, and the OutputPumps that copy its stdout and stderr pipes. It closes the parent's
// copies of the child's descriptors after the spawn and tells its owner when the child exited
// and when every pipe reached end of file. Owned by WorkerGroup (a worker) and Launch (an ssh);
// io thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <system_error>
#include <vector>

#include "common/exit_status.hpp"
#include "process/output_pump.hpp"
#include "process/process_spawner.hpp"

namespace cohort {

class SpawnedChild {
 public:
  enum class Stream { Out, Err };
  struct Events {
    std::function<void(ExitStatus)> exited;
    std::function<void()> drained;  ///< every pump reached end of file (never, without pumps)
  };

  explicit SpawnedChild(boost::asio::io_context& io) : io_(io) {}
  /// Closes the pumps and descriptors; the child itself is left alone.
  ~SpawnedChild();
  SpawnedChild(const SpawnedChild&) = delete;
  SpawnedChild& operator=(const SpawnedChild&) = delete;

  /// Hands over `fd`, which only the child needs (a log file, /dev/null): closed after the spawn.
  int for_child(int fd);
  /// Hands over `fd`, which the parent needs as long as the child (a file a pump writes).
  int keep(int fd);
  /// A pipe from the child's `stream` to a pump that copies it to `target`. Returns the end the
  /// child gets (closed here after the spawn), or -1 when no pipe could be made.
  int pipe_to(Stream stream, PumpTarget target);

  /// Spawns `request` and closes the child's descriptors. On success the pumps start and
  /// `events` follow; on failure it returns false with `error` set and the pumps are dropped.
  bool spawn(ProcessSpawner& spawner, const SpawnRequest& request, Events events,
             std::error_code& error);
  /// Records `status` for a child that was never started.
  void never_ran(ExitStatus status) { status_ = status; }
  /// Stops reading the pipes; their end of file follows.
  void close_pumps();
  /// Held pumps (PumpTarget::held) print what they kept, and every line after it.
  void release_held_output();
  /// Held pumps forget what they kept, and every line after it.
  void drop_held_output();

  pid_t pid() const { return pid_; }
  const std::optional<ExitStatus>& status() const { return status_; }
  bool drained() const { return open_pumps_ == 0; }
  bool ended() const { return status_.has_value() && drained(); }
  /// The pump of `stream`, or null when that stream is not piped.
  const std::shared_ptr<OutputPump>& pump(Stream stream) const {
    return stream == Stream::Out ? out_ : err_;
  }

 private:
  void close_child_fds();

  boost::asio::io_context& io_;
  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
  std::shared_ptr<OutputPump> out_, err_;
  int open_pumps_ = 0;
  std::vector<int> child_fds_;  ///< closed after the spawn
  std::vector<int> kept_fds_;   ///< closed with this object
  Events events_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cohort
