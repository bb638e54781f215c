#include "common/host_port.hpp"

#include <boost/asio/ip/address.hpp>
#include <cctype>

#include "common/text.hpp"

namespace cohort {

bool is_host_name(std::string host) {
  if (!host.empty() && host.back() == '.') host.pop_back();
  if (host.empty() || host.size() > 253) return false;
  for (const std::string& label : split(host, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
    }
  }
  return true;
}

std::optional<HostPort> parse_host_port(const std::string& text, uint16_t default_port) {
  HostPort result;
  std::string port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) return std::nullopt;
    result.host = text.substr(1, close - 1);
    std::string rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port_text = rest.substr(1);
    }
  } else {
    size_t colon = text.rfind(':');
    bool single_colon = colon != std::string::npos && text.find(':') == colon;
    result.host = single_colon ? text.substr(0, colon) : text;
    if (single_colon) port_text = text.substr(colon + 1);
  }
  if (!is_host_name(result.host) && !is_ip_address(result.host)) return std::nullopt;
  result.port = default_port;
  if (!port_text.empty() || (text.back() == ':')) {
    auto port = parse_int(port_text);
    if (!port || *port < 0 || *port > 65535) return std::nullopt;
    result.port = static_cast<uint16_t>(*port);
  }
  return result;
}

std::string host_port_text(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::optional<std::pair<uint16_t, uint16_t>> parse_port_range(const std::string& text) {
  auto parts = split(text, '-');
  auto low = parse_int(parts[0]);
  auto high = parts.size() == 2 ? parse_int(parts[1]) : low;
  if (parts.size() > 2 || !low || !high || *low < 1 || *high < *low || *high > 65535) {
    return std::nullopt;
  }
  return std::make_pair(static_cast<uint16_t>(*low), static_cast<uint16_t>(*high));
}

bool is_ip_address(const std::string& host) {
  boost::system::error_code error;
  boost::asio::ip::make_address(host, error);
  return !error;
}

bool is_loopback_address(const std::string& host) {
  boost::system::error_code error;
  auto address = boost::asio::ip::make_address(host, error);
  if (error) return false;
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return address.to_v6().to_v4().is_loopback();
  }
  return address.is_loopback();
}

}  // namespace cohort
