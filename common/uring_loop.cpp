#include "common/uring_loop.hpp"

#include <liburing.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/log.hpp"
#include "common/text.hpp"

namespace cohort {
namespace {

// Submission queue entries (a full queue is submitted early) and completion queue entries (one
// recv waits per connection; past the queue, completions wait in the kernel, IORING_FEAT_NODROP,
// until on_completions asks for them).
constexpr unsigned kEntries = 1024;
constexpr unsigned kCompletionEntries = 16384;
// How long the context's destruction waits for the kernel to end what is in flight.
constexpr auto kShutdownWait = std::chrono::seconds(1);

std::string missing_feature(io_uring& ring, const io_uring_params& params) {
  constexpr unsigned needed = IORING_FEAT_FAST_POLL | IORING_FEAT_NODROP;
  if ((params.features & needed) != needed) {
    return "this kernel's io_uring would wait for sockets on worker threads (Linux 5.7 or later "
           "polls them)";
  }
  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  if (probe == nullptr) return "io_uring cannot say which operations it supports";
  bool supported = io_uring_opcode_supported(probe, IORING_OP_RECV) &&
                   io_uring_opcode_supported(probe, IORING_OP_SEND) &&
                   io_uring_opcode_supported(probe, IORING_OP_ASYNC_CANCEL);
  io_uring_free_probe(probe);
  return supported ? std::string() : "this kernel's io_uring has no socket recv, send or cancel";
}

// Completions are run as task work on the context's thread. Cooperative (Linux 5.19+): the kernel
// runs it when the thread next enters the kernel or sleeps, rather than interrupting it while it
// handles a batch; older kernels refuse the flag (EINVAL), and get the ring without it.
int init_ring(io_uring& ring, io_uring_params& params) {
  int result = -EINVAL;
  for (unsigned cooperative : {IORING_SETUP_COOP_TASKRUN, 0u}) {
    params = io_uring_params{};
    params.flags = IORING_SETUP_CQSIZE | cooperative;
    params.cq_entries = kCompletionEntries;
    result = io_uring_queue_init_params(kEntries, &ring, &params);
    if (result != -EINVAL) break;
  }
  return result;
}

}  // namespace

UringLoop* UringLoop::open(boost::asio::io_context& context, std::string* why) {
  auto& loop = boost::asio::use_service<UringLoop>(context);
  if (loop.usable()) return &loop;
  if (why != nullptr) *why = loop.unusable_reason();
  return nullptr;
}

UringLoop::UringLoop(boost::asio::execution_context& context)
    : boost::asio::execution_context::service(context),
      context_(static_cast<boost::asio::io_context&>(context)),
      ring_descriptor_(context_) {
  start_ring();
}

UringLoop::~UringLoop() {
  if (ring_ready_) io_uring_queue_exit(ring_.get());
}

void UringLoop::start_ring() {
  ring_ = std::make_unique<io_uring>();
  io_uring_params params{};
  int result = init_ring(*ring_, params);
  if (result < 0) {
    unusable_reason_ = cat("io_uring_setup: ", std::strerror(-result));
    ring_.reset();
    return;
  }
  unusable_reason_ = missing_feature(*ring_, params);
  boost::system::error_code error;
  if (unusable_reason_.empty()) ring_descriptor_.assign(ring_->ring_fd, error);
  if (error) unusable_reason_ = cat("watching the ring: ", error.message());
  if (!unusable_reason_.empty()) {
    io_uring_queue_exit(ring_.get());
    ring_.reset();
    return;
  }
  ring_ready_ = true;
}

// Puts the op in flight: into a queue entry, or, if the kernel takes none now (the queue full and
// not submittable), behind the others that wait for one.
void UringLoop::start(SocketOp& op, std::shared_ptr<void> hold) {
  started_.fetch_add(1, std::memory_order_relaxed);
  op.hold = std::move(hold);
  op.in_flight = true;
  op.previous = nullptr;
  op.next = in_flight_;
  if (in_flight_ != nullptr) in_flight_->previous = &op;
  in_flight_ = &op;
  io_uring_sqe* entry = waiting_first_ == nullptr ? free_entry() : nullptr;
  if (entry != nullptr) {
    prepare(entry, op);
  } else {
    op.next_waiting = nullptr;
    (waiting_last_ != nullptr ? waiting_last_->next_waiting : waiting_first_) = &op;
    waiting_last_ = &op;
  }
  submit_soon();
}

io_uring_sqe* UringLoop::free_entry() {
  io_uring_sqe* entry = io_uring_get_sqe(ring_.get());
  if (entry == nullptr) {  // the queue is full: hand it to the kernel now
    io_uring_submit(ring_.get());
    entry = io_uring_get_sqe(ring_.get());
  }
  return entry;
}

void UringLoop::prepare(io_uring_sqe* entry, SocketOp& op) {
  if (op.is_send) {
    io_uring_prep_send(entry, op.descriptor, op.buffer, op.size, MSG_NOSIGNAL);
  } else {
    io_uring_prep_recv(entry, op.descriptor, op.buffer, op.size, 0);
  }
  io_uring_sqe_set_data(entry, &op);
}

void UringLoop::prepare_waiting() {
  while (waiting_first_ != nullptr) {
    io_uring_sqe* entry = io_uring_get_sqe(ring_.get());
    if (entry == nullptr) return;
    SocketOp& op = *waiting_first_;
    waiting_first_ = op.next_waiting;
    if (waiting_first_ == nullptr) waiting_last_ = nullptr;
    prepare(entry, op);
  }
}

void UringLoop::untrack(SocketOp& op) {
  if (op.previous != nullptr) op.previous->next = op.next;
  if (op.next != nullptr) op.next->previous = op.previous;
  if (in_flight_ == &op) in_flight_ = op.next;
  op.previous = op.next = nullptr;
  op.in_flight = false;
}

// Entries queued while completions are handled go in at the end of that batch; others (a reply
// to a waiter, queued by a handler of its own) after whatever handlers the context has ready.
void UringLoop::submit_soon() {
  if (reaping_ || submit_posted_) return;
  submit_posted_ = true;
  boost::asio::post(context_, [this] {
    submit_posted_ = false;
    submit();
  });
}

// Submits what is queued, and then what waited for room in the queue. EBUSY or EAGAIN (completions
// the kernel holds for us, or no memory for more requests): the next completions submit again,
// and ops that still wait for an entry ask for another round.
void UringLoop::submit() {
  if (shut_down_) return;
  for (int round = 0; round < 2 && io_uring_sq_ready(ring_.get()) > 0; ++round) {
    int result = io_uring_submit(ring_.get());
    if (result < 0 && result != -EBUSY && result != -EAGAIN) {
      log::warn("io_uring: submitting failed: ", std::strerror(-result));
    }
    prepare_waiting();
  }
  if (waiting_first_ != nullptr) submit_soon();
  wait_for_completions();
}

void UringLoop::wait_for_completions() {
  if (waiting_ || in_flight_ == nullptr || shut_down_) return;
  waiting_ = true;
  ring_descriptor_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                              [this](const boost::system::error_code& error) {
                                waiting_ = false;
                                on_completions(error);
                              });
}

// Runs every completion the ring holds, and those that overflowed it; each may queue more
// entries, which go to the kernel in one submission at the end.
void UringLoop::on_completions(const boost::system::error_code& error) {
  if (error == boost::asio::error::operation_aborted || shut_down_) return;
  reaping_ = true;
  do {
    if (io_uring_cq_has_overflow(ring_.get())) io_uring_get_events(ring_.get());
    reap();
  } while (io_uring_cq_has_overflow(ring_.get()));
  reaping_ = false;
  submit();
}

void UringLoop::reap() {
  unsigned head;
  unsigned seen = 0;
  io_uring_cqe* completion;
  io_uring_for_each_cqe(ring_.get(), head, completion) {
    ++seen;
    auto* op = static_cast<SocketOp*>(io_uring_cqe_get_data(completion));
    if (op == nullptr) continue;
    int result = completion->res;
    untrack(*op);
    std::shared_ptr<void> hold = std::move(op->hold);  // the owner lives through its completion
    op->complete(op->owner, result);
  }
  io_uring_cq_advance(ring_.get(), seen);
}

// The io_context is being destroyed (its thread has stopped): ends what is in flight in the kernel,
// so that no buffer an op names is written after its owner is gone, and drops the owners without
// calling them.
void UringLoop::shutdown() {
  if (shut_down_ || !ring_ready_) return;
  shut_down_ = true;
  ring_descriptor_.release();
  for (SocketOp* op = waiting_first_; op != nullptr;) {  // never reached the kernel
    SocketOp* next = op->next_waiting;
    untrack(*op);
    op->hold.reset();
    op = next;
  }
  waiting_first_ = waiting_last_ = nullptr;
  for (SocketOp* op = in_flight_; op != nullptr; op = op->next) {
    io_uring_sqe* entry = free_entry();
    if (entry == nullptr) break;  // those left are dropped after the wait below
    io_uring_prep_cancel(entry, op, 0);
    io_uring_sqe_set_data(entry, nullptr);
  }
  io_uring_submit(ring_.get());
  auto deadline = std::chrono::steady_clock::now() + kShutdownWait;
  while (in_flight_ != nullptr && std::chrono::steady_clock::now() < deadline) {
    io_uring_cqe* completion = nullptr;
    __kernel_timespec wait{0, 50'000'000};
    if (io_uring_wait_cqe_timeout(ring_.get(), &completion, &wait) < 0) continue;
    auto* op = static_cast<SocketOp*>(io_uring_cqe_get_data(completion));
    io_uring_cqe_seen(ring_.get(), completion);
    if (op == nullptr) continue;
    untrack(*op);
    op->hold.reset();
  }
  while (in_flight_ != nullptr) {  // the kernel did not answer in time: drop them all the same
    SocketOp* op = in_flight_;
    untrack(*op);
    op->hold.reset();
  }
  io_uring_queue_exit(ring_.get());
  ring_ready_ = false;
}

}  // namespace cohort
