// Configure-time probe: proves that the Boost in use has what cohort relies on.
// Asio C++20 coroutines with as_tuple and the awaitable || operator.
// Exits 0 when everything works; CMake runs it with try_run.
#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <chrono>
#include <cstdio>

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

asio::awaitable<int> timed_wait() {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex, std::chrono::seconds(10));
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return ec ? 1 : 0;
}

int main() {
  asio::io_context io;
  int result = -1;
  asio::steady_timer fast(io, std::chrono::milliseconds(1));
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto either = co_await (timed_wait() || fast.async_wait(asio::use_awaitable));
        result = static_cast<int>(either.index());
      },
      asio::detached);
  io.run();
  if (result != 1) return 14;
  std::puts("boost probe ok: asio coroutines, as_tuple, awaitable operators");
  return 0;
}
