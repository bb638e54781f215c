#include "agent/dump_reports.hpp"

#include <boost/asio/post.hpp>
#include <utility>

#include "common/signal_blocking.hpp"

namespace cohort {

DumpReports::DumpReports(boost::asio::io_context& io, Deliver deliver)
    : io_(io), deliver_(std::move(deliver)) {}

DumpReports::~DumpReports() {
  alive_.reset();
  if (thread_.joinable()) thread_.join();
}

void DumpReports::make(Job job) {
  queued_.push_back(std::move(job));
  start_next();
}

void DumpReports::start_next() {
  if (making_ || queued_.empty()) return;
  making_ = true;
  Job job = std::move(queued_.front());
  queued_.pop_front();
  if (thread_.joinable()) thread_.join();  // the last maker, done posting its report
  std::weak_ptr<int> alive = alive_;
  SignalsBlocked for_the_thread;  // the agent takes its signals on its own thread
  thread_ = std::thread([this, alive, job = std::move(job)] {
    proto::Collectives report = job();
    boost::asio::post(io_, [this, alive, report = std::move(report)]() mutable {
      if (alive.lock()) delivered(std::move(report));
    });
  });
}

void DumpReports::delivered(proto::Collectives report) {
  making_ = false;
  std::weak_ptr<int> alive = alive_;
  deliver_(std::move(report));
  if (alive.lock()) start_next();  // unless delivering it ended the agent
}

}  // namespace cohort
