#include "common/accept_backoff.hpp"

#include <algorithm>
#include <boost/asio/error.hpp>
#include <cerrno>

namespace cohort {

bool AcceptBackoff::is_shortage(const boost::system::error_code& error) {
  namespace asio_error = boost::asio::error;
  return error == asio_error::no_descriptors || error == asio_error::no_buffer_space ||
         error == asio_error::no_memory ||
         error == boost::system::error_code(ENFILE, boost::system::system_category());
}

std::chrono::milliseconds AcceptBackoff::next_delay() {
  delay_ = std::clamp(delay_ * 2, kFirstDelay, kMaxDelay);
  return delay_;
}

bool AcceptBackoff::time_to_log(std::chrono::steady_clock::time_point now) { return log_.due(now); }

}  // namespace cohort
