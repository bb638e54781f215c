#include "agent/gpu_health.hpp"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>

#include "common/signal_blocking.hpp"
#include "common/text.hpp"

namespace cohort {
namespace {

constexpr std::chrono::milliseconds kPollInterval{100};

std::string gpu_name(const GpuState& gpu) {
  return gpu.bus_id.empty() ? cat("GPU ", gpu.index)
                            : cat("GPU ", gpu.index, " (", gpu.bus_id, ")");
}

// The node's GPUs in NVML's reading, in the order of `indices`; those missing are left out.
std::vector<const GpuState*> node_gpus(const std::vector<GpuState>& gpus,
                                       const std::vector<int>& indices) {
  std::vector<const GpuState*> found;
  for (int index : indices) {
    if (index >= 0 && static_cast<size_t>(index) < gpus.size()) found.push_back(&gpus[index]);
  }
  return found;
}

}  // namespace

std::vector<std::string> gpus_still_held(const std::vector<GpuState>& gpus,
                                         const std::vector<int>& indices,
                                         const PreviousRoundTest& of_previous_round) {
  std::vector<std::string> held;
  for (const GpuState* gpu : node_gpus(gpus, indices)) {
    for (pid_t pid : gpu->processes) {
      if (of_previous_round(pid)) held.push_back(cat(gpu_name(*gpu), " held by pid ", pid));
    }
  }
  return held;
}

std::string gpu_problem(const GpuReading& gpus, const std::vector<int>& indices,
                        std::chrono::milliseconds reclaim_timeout,
                        const PreviousRoundTest& of_previous_round) {
  if (!gpus) return "NVML no longer answers (the driver or a GPU has failed)";
  std::vector<const GpuState*> mine = node_gpus(*gpus, indices);
  std::vector<std::string> problems;
  if (mine.size() < indices.size()) {
    problems.push_back(cat("expected ", indices.size(), " GPUs, NVML sees ", mine.size(),
                           " of them (", gpus->size(), " in all)"));
  }
  std::vector<std::string> held = gpus_still_held(*gpus, indices, of_previous_round);
  if (!held.empty()) {
    problems.push_back(cat("a process of the previous round still holds a GPU after the ",
                           reclaim_timeout.count() / 1000.0,
                           " s --gpu-reclaim-timeout: ", join(held, ", ")));
  }
  for (const GpuState* gpu : mine) {
    if (gpu->uncorrected_ecc > 0) {
      problems.push_back(
          cat(gpu_name(*gpu), " has ", gpu->uncorrected_ecc, " uncorrectable ECC error(s)"));
    }
    if (gpu->memory_repair_pending) {
      problems.push_back(
          cat(gpu_name(*gpu), " has a row remap or page retirement pending (it needs a reset)"));
    }
  }
  return join(problems, "; ");
}

GpuHealthCheck::GpuHealthCheck(Clock& clock, GpuHealthSettings settings, Reader read)
    : clock_(clock),
      settings_(std::move(settings)),
      read_(std::move(read)),
      poll_timer_(clock.make_timer()),
      answer_timer_(clock.make_timer()) {}

GpuHealthCheck::GpuHealthCheck(boost::asio::io_context& io, Clock& clock,
                               GpuHealthSettings settings, Reader read)
    : GpuHealthCheck(clock, std::move(settings), std::move(read)) {
  io_ = &io;
  delivery_->io = &io;
}

GpuHealthCheck::~GpuHealthCheck() {
  alive_.reset();
  {
    std::lock_guard<std::mutex> lock(delivery_->mutex);
    delivery_->io = nullptr;
  }
  if (!thread_.joinable()) return;
  // A reading still under way may be stuck in the driver for good: a stop must not wait on it.
  reading_ ? thread_.detach() : thread_.join();
}

void GpuHealthCheck::read_ahead() {
  if (!indices_ && !reading_ && !read_ahead_) read();
}

void GpuHealthCheck::run(std::vector<pid_t> previous_round, Done done) {
  bool waiting = running();
  done_ = std::move(done);
  if (waiting) return;
  previous_round_ = std::move(previous_round);
  reclaim_deadline_ = clock_.now() + settings_.reclaim_timeout;
  if (reading_) return wait_for_reading();  // the reading under way decides
  if (read_ahead_) {
    GpuReading reading = std::move(*read_ahead_);
    read_ahead_.reset();
    return decide(reading);
  }
  read();
}

// One reading at a time; on the caller's thread, or on thread_ with the answer posted to io_.
void GpuHealthCheck::read() {
  reading_ = true;
  if (io_ == nullptr) return on_reading(read_());
  if (thread_.joinable()) thread_.join();  // the last reading's thread, done posting
  reading_since_ = clock_.now();
  std::weak_ptr<int> alive = alive_;
  SignalsBlocked for_the_thread;  // the agent takes its signals on its own thread
  thread_ = std::thread([this, alive, read = read_, delivery = delivery_] {
    GpuReading reading = read();
    std::lock_guard<std::mutex> lock(delivery->mutex);
    if (delivery->io == nullptr) return;
    boost::asio::post(*delivery->io, [this, alive, reading = std::move(reading)]() mutable {
      if (alive.lock()) on_reading(std::move(reading));
    });
  });
  if (running()) wait_for_reading();
}

// A run() waits on the reading under way until NVML's answer timeout, counted from its start.
void GpuHealthCheck::wait_for_reading() {
  if (io_ == nullptr) return;
  answer_timer_->start_at(reading_since_ + settings_.answer_timeout, [this] { reading_overdue(); });
}

// NVML has not answered in time: the node is unhealthy. The reading goes on; a later run() waits
// for it again (and takes its answer if it ever comes).
void GpuHealthCheck::reading_overdue() {
  if (!reading_ || !running()) return;
  Done report = std::move(done_);
  done_ = nullptr;
  report(cat("NVML did not answer within the ", settings_.answer_timeout.count() / 1000.0,
             " s --health-check-timeout: the driver or a GPU is hung"));
}

void GpuHealthCheck::on_reading(GpuReading reading) {
  reading_ = false;
  answer_timer_->cancel();
  if (!indices_) {  // the first reading says which GPUs the node has, once and for all
    indices_ = reading && !reading->empty() ? settings_.visible(static_cast<int>(reading->size()))
                                            : std::vector<int>();
  }
  if (!running()) {
    read_ahead_ = std::move(reading);
    return;
  }
  decide(reading);
}

void GpuHealthCheck::decide(const GpuReading& reading) {
  auto test = [this](pid_t pid) { return of_previous_round(pid); };
  if (!indices_->empty() && reading && clock_.now() < reclaim_deadline_ &&
      !gpus_still_held(*reading, *indices_, test).empty()) {
    poll_timer_->start_after(kPollInterval, [this] { read(); });
    return;
  }
  std::string problem =
      indices_->empty() ? "" : gpu_problem(reading, *indices_, settings_.reclaim_timeout, test);
  Done report = std::move(done_);
  done_ = nullptr;
  report(problem);
}

bool GpuHealthCheck::of_previous_round(pid_t pid) const {
  auto listed = [this](pid_t candidate) {
    return std::find(previous_round_.begin(), previous_round_.end(), candidate) !=
           previous_round_.end();
  };
  if (listed(pid)) return true;
  pid_t group = ::getpgid(pid);  // a worker's child: workers lead their own process groups
  return group > 0 && listed(group);
}

}  // namespace cohort
