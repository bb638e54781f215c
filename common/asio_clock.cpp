#include "common/asio_clock.hpp"

#include <boost/asio/steady_timer.hpp>

namespace cohort {
namespace {

// A steady_timer whose stale completions are dropped: every start, cancel and the destructor
// move the generation on, and a completion runs its callback only if it is the current one (a
// timer that expired just before cancel() would otherwise still run its handler).
class AsioTimer final : public Timer {
 public:
  explicit AsioTimer(boost::asio::io_context& io) : timer_(io) {}
  ~AsioTimer() override { ++*generation_; }

  void start_at(SteadyTime deadline, Callback fire) override {
    timer_.expires_at(deadline);
    wait(std::move(fire));
  }
  void start_after(SteadyDuration delay, Callback fire) override {
    timer_.expires_after(delay);
    wait(std::move(fire));
  }
  void cancel() override {
    ++*generation_;
    timer_.cancel();
  }

 private:
  void wait(Callback fire) {
    uint64_t armed = ++*generation_;
    timer_.async_wait([generation = generation_, armed,
                       fire = std::move(fire)](const boost::system::error_code& error) {
      if (!error && *generation == armed) fire();
    });
  }

  boost::asio::steady_timer timer_;
  std::shared_ptr<uint64_t> generation_ = std::make_shared<uint64_t>(0);
};

}  // namespace

std::unique_ptr<Timer> AsioClock::make_timer() { return std::make_unique<AsioTimer>(io_); }

}  // namespace cohort
