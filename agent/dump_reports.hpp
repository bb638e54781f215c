// Makes this node's reports of its flight-recorder dumps off the agent's io thread. A report
// reads and unpickles each rank's dump (an untrusted file of up to 64 MiB), which on a node of
// many ranks can take seconds; on the io thread that would stop the agent's heartbeats, and the
// daemon would drop the node as lost in the middle of its hang's verdict. Reports are made one at
// a time, in the order asked, each on a thread of its own, and handed to `deliver` on the io
// thread. Owned by the Agent; its methods run on the io thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "proto/control_messages.hpp"

namespace cohort {

class DumpReports {
 public:
  /// Makes a report: reads files and parses them, touching nothing the io thread uses.
  using Job = std::function<proto::Collectives()>;
  using Deliver = std::function<void(proto::Collectives)>;

  DumpReports(boost::asio::io_context& io, Deliver deliver);
  /// Waits for the report being made (the dump reader's limits bound it) and drops it.
  ~DumpReports();
  DumpReports(const DumpReports&) = delete;
  DumpReports& operator=(const DumpReports&) = delete;

  /// Makes `job`'s report once those asked for before it are delivered.
  void make(Job job);
  /// A report is being made or waits its turn.
  bool busy() const { return making_ || !queued_.empty(); }

 private:
  void start_next();
  void delivered(proto::Collectives report);

  boost::asio::io_context& io_;
  Deliver deliver_;
  std::deque<Job> queued_;
  bool making_ = false;
  std::thread thread_;                                     ///< the last report's maker
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  ///< reports posted after us are dropped
};

}  // namespace cohort
