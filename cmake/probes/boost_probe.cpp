// Configure-time probe: proves that the Boost in use has what cohort relies on.
// - Asio C++20 coroutines with as_tuple and the awaitable || operator;
// - Boost.Process v2 with a launcher initializer whose on_exec_setup runs in the child
//   (setpgid + PR_SET_PDEATHSIG), and a child whose exit status is read back.
// Exits 0 when everything works; CMake runs it with try_run.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/process/v2.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>

namespace asio = boost::asio;
namespace bp2 = boost::process::v2;
using namespace asio::experimental::awaitable_operators;

struct ChildSetup {
  template <typename Launcher>
  bp2::error_code on_exec_setup(Launcher&, const bp2::filesystem::path&, const char* const*) {
    if (::setpgid(0, 0) != 0 || ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
      return bp2::error_code(errno, bp2::system_category());
    return {};
  }
};

asio::awaitable<int> timed_wait() {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex, std::chrono::seconds(10));
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return ec ? 1 : 0;
}

int main() {
  asio::io_context io;
  bp2::error_code ec;
  // The shell prints 1 when its pgid equals its pid (setpgid ran) and exits 3.
  bp2::process child = bp2::posix::default_launcher()(
      io.get_executor(), ec, "/bin/sh", std::vector<std::string>{"-c", "exit 3"}, ChildSetup{});
  if (ec) return 10;
  if (::getpgid(child.id()) != child.id()) return 11;
  int status = 0;
  if (::waitpid(child.id(), &status, 0) != child.id()) return 12;
  child.detach();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 3) return 13;

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
  std::puts("boost probe ok: asio coroutines, as_tuple, awaitable operators, process v2");
  return 0;
}
