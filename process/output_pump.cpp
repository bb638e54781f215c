#include "process/output_pump.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/console.hpp"
#include "common/log.hpp"
#include "common/text.hpp"

namespace cohort {
namespace {

// How often a pump paced by the console looks whether it may read again.
constexpr std::chrono::milliseconds kConsolePoll{10};

}  // namespace

int write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t wrote = ::write(fd, data.data(), data.size());
    if (wrote < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {  // a non-blocking console: wait until it drains
        ::usleep(1000);
        continue;
      }
      return errno;  // console gone (EPIPE), disk full: drop the output, never the agent
    }
    data.remove_prefix(static_cast<size_t>(wrote));
  }
  return 0;
}

OutputPump::OutputPump(boost::asio::io_context& io, int pipe_read, PumpTarget target)
    : pipe_(io, pipe_read),
      pace_timer_(io),
      idle_timer_(io),
      pace_bytes_(console::kPaceBytes),
      target_(std::move(target)),
      buffer_(std::make_unique_for_overwrite<char[]>(kReadBytes)) {}

void OutputPump::start(std::function<void()> on_eof, int pid) {
  on_eof_ = std::move(on_eof);
  if (pid > 0) target_.prefix = substitute(target_.prefix, "pid", std::to_string(pid));
  read_more();
}

void OutputPump::close() {
  target_.on_output = nullptr;  // a read that completed before the close must not reach the owner
  boost::system::error_code ignored;
  pipe_.close(ignored);
  pace_timer_.cancel();
  idle_timer_.cancel();
}

void OutputPump::read_to_end() {
  pace_bytes_ = console::kMaxQueuedBytes;
  pace_timer_.cancel();
}

void OutputPump::read_more() {
  paced_ = target_.console_fd >= 0 && console::queued_bytes() > pace_bytes_;
  if (paced_) return wait_for_console();
  pipe_.async_read_some(
      boost::asio::buffer(buffer_.get(), kReadBytes),
      [self = shared_from_this()](const boost::system::error_code& error, size_t size) {
        if (size > 0) self->consume(self->buffer_.get(), size);
        if (!error) return self->read_more();
        self->finish();
      });
}

// A worker whose lines wait for the console is not hung: each look while its pipe is too full
// for another write counts as a sign of life. One with room left in its pipe is not held up by
// the console, so its silence counts as silence.
void OutputPump::wait_for_console() {
  pace_timer_.expires_after(kConsolePoll);
  pace_timer_.async_wait([self = shared_from_this()](const boost::system::error_code&) {
    if (!self->pipe_.is_open()) return self->finish();
    if (self->target_.on_output && self->writer_may_be_blocked()) self->target_.on_output();
    self->read_more();
  });
}

// Whether the pipe has less room than one atomic write (PIPE_BUF): a writer may then wait in
// write(). When the pipe cannot be asked, assumes it may.
bool OutputPump::writer_may_be_blocked() {
  int fd = pipe_.native_handle();
  int unread = 0;
  int capacity = ::fcntl(fd, F_GETPIPE_SZ);
  if (capacity <= 0 || ::ioctl(fd, FIONREAD, &unread) != 0) return true;
  return capacity - unread < PIPE_BUF;
}

void OutputPump::finish() {
  flush_partial();
  std::string* console = console_out();
  if (after_cr_ && console != nullptr) console->push_back('\n');  // keep the last redraw in sight
  write_out();
  close();
  if (auto done = std::move(on_eof_)) done();
}

void OutputPump::consume(const char* data, size_t size) {
  if (target_.on_output) target_.on_output();
  last_read_ = std::chrono::steady_clock::now();
  std::string_view chunk(data, size);
  for (;;) {
    size_t end = chunk.find_first_of("\r\n");
    if (end == std::string_view::npos) break;
    char terminator = chunk[end];
    if (terminator == '\n' && end == 0 && partial_.empty() && after_cr_) {
      end_carriage_return();
    } else if (partial_.empty()) {  // a whole line in this read: at most the buffer
      emit(chunk.substr(0, end), terminator);
    } else {
      append_partial(chunk.substr(0, end));
      emit(partial_, terminator);
      partial_.clear();
    }
    chunk.remove_prefix(end + 1);
  }
  append_partial(chunk);
  write_out();
  arm_idle_flush();
}

// Shows the start of a line that still waits for its end (a prompt, print(..., end=""), a
// progress bar's redraw that its next '\r' would end) once the worker has been silent for
// kIdleFlush: output that keeps coming, or waits for the console (then the worker may not be
// silent at all), keeps its lines whole. Not for cohort launch's pumps, which relay a host's
// lines (already prefixed there): a line that stalls on its way, behind a console that did not
// read, would be split, and another host's lines put inside it; nor while the line that says
// a launched agent is ready may be arriving: it must not reach the console.
void OutputPump::arm_idle_flush() {
  if (idle_armed_ || partial_.size() <= shown_ || !target_.ready_prefix.empty() ||
      !target_.prefixed_marker.empty())
    return;
  idle_armed_ = true;
  idle_timer_.expires_at(last_read_ + kIdleFlush);
  idle_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    self->idle_armed_ = false;
    if (error || !self->pipe_.is_open() || self->paced_) return;  // a later read arms it again
    if (std::chrono::steady_clock::now() < self->last_read_ + kIdleFlush)
      return self->arm_idle_flush();
    self->show_partial();
  });
}

void OutputPump::show_partial() {
  if (partial_.size() <= shown_) return;
  show(partial_, "");
  shown_ = partial_.size();
  write_out();
}

// A line longer than kMaxLineBytes goes out in pieces of that size as it comes, the line still
// whole on the console and in the file: no line end after a piece, no prefix before the next.
void OutputPump::append_partial(std::string_view piece) {
  while (partial_.size() + piece.size() > kMaxLineBytes) {
    size_t fits = kMaxLineBytes - partial_.size();
    partial_.append(piece.substr(0, fits));
    emit(partial_, kNoLineEnd);
    partial_.clear();
    piece.remove_prefix(fits);
  }
  partial_.append(piece);
}

// At the end of the stream, inside a line: the console ends it (what comes next has a prefix of
// its own), the log file keeps the bytes as the worker wrote them.
void OutputPump::flush_partial() {
  if (partial_.empty() && !continued_) return;
  size_t file_before = file_batch_.size();
  emit(partial_);
  if (file_batch_.size() > file_before && file_batch_.back() == '\n') file_batch_.pop_back();
  partial_.clear();
}

void OutputPump::release() {
  if (!target_.held) return;
  target_.held = false;
  if (!dropping_held_ && !held_.empty()) console::write_output(target_.console_fd, held_);
  held_.clear();
  held_.shrink_to_fit();
}

void OutputPump::drop_held() {
  dropping_held_ = true;
  held_.clear();
  held_.shrink_to_fit();
}

void OutputPump::emit(std::string_view line, char terminator) {
  after_cr_ = terminator == '\r' && !line.empty();
  if (terminator == '\r' && line.empty()) {  // at the line's start already: nothing to redraw
    if (target_.file_fd >= 0) file_batch_.push_back('\r');
    return;
  }
  // Anywhere in the line: a transport may label it (srun --label: "0: ").
  size_t ready_at = target_.ready_prefix.empty() ? line.npos : line.find(target_.ready_prefix);
  if (ready_at != line.npos) {
    std::string_view rest = line.substr(ready_at + target_.ready_prefix.size());
    target_.ready_prefix.clear();  // the first one only
    after_cr_ = false;
    if (auto ready = std::move(target_.on_ready)) ready(rest);
    return;
  }
  show(line, terminator == kNoLineEnd ? std::string_view() : std::string_view(&terminator, 1));
  shown_ = 0;
  continued_ = terminator == kNoLineEnd;
  if (target_.copy_fd >= 0 &&
      std::any_of(target_.copy_filters.begin(), target_.copy_filters.end(),
                  [line](const std::string& filter) { return line.find(filter) != line.npos; })) {
    copy_batch_.append(target_.prefix).append(line).push_back('\n');
  }
  if (capturing_ && captured_.size() + line.size() < kMaxCaptureBytes)
    captured_.append(line).push_back('\n');
  keep_in_tail(line, terminator == '\r');
}

std::string* OutputPump::console_out() {
  if (target_.console_fd < 0 || dropping_held_) return nullptr;
  return target_.held ? &held_ : &console_batch_;
}

void OutputPump::show(std::string_view line, std::string_view end) {
  if (std::string* out = console_out()) {
    size_t before = out->size();
    const std::string& marker = target_.prefixed_marker;
    bool prefixed = !marker.empty() && line.rfind(marker, 0) == 0;
    if (shown_ == 0 && !continued_ && !prefixed) out->append(target_.prefix);
    out->append(line.substr(shown_)).append(end);
    if (target_.held && out->size() > kMaxHeldBytes) out->resize(before);
  }
  if (target_.file_fd >= 0) file_batch_.append(line.substr(shown_)).append(end);
}

void OutputPump::end_carriage_return() {
  after_cr_ = false;
  tail_open_ = false;  // the last redraw stays, as on a terminal
  if (std::string* out = console_out()) out->push_back('\n');
  if (target_.file_fd >= 0) file_batch_.push_back('\n');
}

// A progress bar's redraws (pieces that a '\r' ended) take one place in the tail: the last.
void OutputPump::keep_in_tail(std::string_view line, bool redrawn) {
  if (tail_open_ && !tail_.empty()) {
    tail_.back() = line.substr(0, 1024);
  } else {
    tail_.emplace_back(line.substr(0, 1024));
    if (tail_.size() > kTailLines) tail_.pop_front();
  }
  tail_open_ = redrawn;
}

void OutputPump::write_out() {
  if (!console_batch_.empty()) console::write_output(target_.console_fd, console_batch_);
  if (!file_batch_.empty())
    write_file(target_.file_fd, target_.file_path, file_batch_, file_failed_);
  if (!copy_batch_.empty())
    write_file(target_.copy_fd, target_.copy_path, copy_batch_, copy_failed_);
  console_batch_.clear();
  file_batch_.clear();
  copy_batch_.clear();
}

void OutputPump::write_file(int fd, const std::string& path, const std::string& batch,
                            bool& failed) {
  int error = write_all(fd, batch);
  if (error == 0 || failed) return;
  failed = true;
  log::warn("cannot write ", path.empty() ? "a log file" : path, ": ", std::strerror(error),
            target_.console_fd >= 0 ? "; the lines still reach the console, the file misses them"
                                    : "; lines are missing from it");
}

}  // namespace cohort
