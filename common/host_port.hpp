// host[:port] as torchrun writes it: "node1", "node1:29400", "10.0.0.1:0", "[fe80::1]:29400".
// The host is kept exactly as given: nothing here resolves a name or touches a socket (whether
// a host is this machine is RunEnvironment::is_local_host, in launcher/). Pure; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace cohort {

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

/// nullopt for a host that is neither an address literal nor a host name (empty, a space, a
/// comma, a label that starts with '-'), a bad or out-of-range port, or an unclosed '['.
std::optional<HostPort> parse_host_port(const std::string& text, uint16_t default_port);

/// "host:port" as parse_host_port reads it back: an IPv6 address in brackets ("[::1]:29400").
std::string host_port_text(const std::string& host, uint16_t port);

/// "PORT" or "FIRST-LAST" within 1-65535 (e.g. --store-ports 29500-29599); nullopt otherwise.
std::optional<std::pair<uint16_t, uint16_t>> parse_port_range(const std::string& text);

/// A name as resolvers take it: dot-separated labels of 1 to 63 letters, digits, '-' (not first
/// or last) and '_' (some clusters name nodes so), 253 characters at most, perhaps with the
/// trailing dot of a fully qualified name. Not resolved.
bool is_host_name(std::string host);

/// True for an IPv4 or IPv6 address literal ("10.0.0.1", "::1"), false for a name.
bool is_ip_address(const std::string& host);

/// True for a loopback address literal (127.0.0.0/8, ::1, ::ffff:127.x.y.z); false for names.
bool is_loopback_address(const std::string& host);

}  // namespace cohort
