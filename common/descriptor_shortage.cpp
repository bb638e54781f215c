#include "common/descriptor_shortage.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/log.hpp"

namespace cohort {

DescriptorShortage::DescriptorShortage(std::string who) : who_(std::move(who)) { take_reserve(); }

DescriptorShortage::~DescriptorShortage() {
  if (reserve_ >= 0) ::close(reserve_);
}

void DescriptorShortage::take_reserve() {
  if (reserve_ < 0) reserve_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void DescriptorShortage::refuse_pending(boost::asio::ip::tcp::acceptor& acceptor,
                                        const std::function<void()>& accept_again,
                                        const std::function<void()>& back_off) {
  int refused = -1;
  int accept_errno = EMFILE;  // no reserve to accept with: back off
  {
    std::lock_guard lock(mutex_);
    if (!short_.exchange(true)) {
      log::warn(who_, ": out of file descriptors: refusing new connections until some close (",
                descriptor_limit_advice(), ")");
    }
    if (reserve_ >= 0) {
      boost::system::error_code ignored;
      acceptor.non_blocking(true, ignored);  // never wait here for a connection that went away
      ::close(reserve_);
      reserve_ = -1;
      refused = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
      accept_errno = errno;
      if (refused >= 0) {
        ::close(refused);
        ++refused_;
      }
    }
    take_reserve();  // or, without one before, maybe one came free since
  }
  if (refused >= 0) return accept_again();
  if (accept_errno != EAGAIN && accept_errno != EWOULDBLOCK) return back_off();
  acceptor.async_wait(boost::asio::ip::tcp::acceptor::wait_read,
                      [accept_again](const boost::system::error_code& error) {
                        if (!error) accept_again();
                      });
}

void DescriptorShortage::accepted() {
  if (!short_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mutex_);
  if (!short_.exchange(false)) return;
  log::warn(who_, ": accepting connections again; ", refused_,
            refused_ == 1 ? " connection was" : " connections were",
            " refused while out of file descriptors");
  refused_ = 0;
}

std::string descriptor_limit_advice() {
  rlimit limit{};
  std::string soft = "?";
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    soft = std::to_string(limit.rlim_cur);
  }
  return "the open-file limit is " + soft +
         "; raise it with `ulimit -n` in the shell that starts it, or LimitNOFILE= in its "
         "systemd unit";
}

}  // namespace cohort
