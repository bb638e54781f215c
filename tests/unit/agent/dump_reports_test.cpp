// DumpReports makes its reports off the io thread, delivers them on it in the order asked, and
// drops a report whose owner is gone.
#include "agent/dump_reports.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

using namespace cohort;
using namespace std::chrono_literals;

namespace {

proto::Collectives report_of_round(int round) {
  proto::Collectives report;
  report.round = round;
  return report;
}

}  // namespace

TEST_CASE("dump reports are made while the io thread runs and delivered in order",
          "[unit][agent]") {
  boost::asio::io_context io;
  auto busy = boost::asio::make_work_guard(io);  // the reports come from other threads
  std::vector<int> delivered;
  DumpReports reports(io, [&](proto::Collectives report) {
    delivered.push_back(report.round);
    if (delivered.size() == 2) io.stop();
  });
  // The first report is made only once the io thread has run a handler posted after it was
  // asked for: made on the io thread, it would wait for itself (and give round -1).
  auto io_ran = std::make_shared<std::promise<void>>();
  std::shared_future<void> io_has_run = io_ran->get_future().share();
  reports.make([io_has_run] {
    return report_of_round(io_has_run.wait_for(10s) == std::future_status::ready ? 1 : -1);
  });
  reports.make([] { return report_of_round(2); });
  CHECK(reports.busy());
  boost::asio::post(io, [io_ran] { io_ran->set_value(); });
  io.run_for(20s);
  CHECK(delivered == std::vector<int>{1, 2});
  CHECK_FALSE(reports.busy());
}

TEST_CASE("a dump report still being made when its owner goes is dropped", "[unit][agent]") {
  boost::asio::io_context io;
  bool delivered = false;
  {
    DumpReports reports(io, [&](proto::Collectives) { delivered = true; });
    reports.make([] {
      std::this_thread::sleep_for(100ms);
      return report_of_round(1);
    });
  }  // waits for the maker, which posts its report to an owner that is gone
  io.run_for(200ms);
  CHECK_FALSE(delivered);
}
