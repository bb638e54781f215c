#include "common/free_port.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace cohort {

int pick_free_port(const std::string& address) {
  namespace ip = boost::asio::ip;
  boost::asio::io_context io;
  boost::system::error_code error;
  ip::address bind_address = ip::make_address(address, error);
  if (error) bind_address = ip::address_v4::any();
  ip::tcp::acceptor acceptor(io);
  ip::tcp::endpoint endpoint(bind_address, 0);
  acceptor.open(endpoint.protocol(), error);
  if (!error) acceptor.bind(endpoint, error);
  if (error) return 0;
  return acceptor.local_endpoint().port();
}

}  // namespace cohort
