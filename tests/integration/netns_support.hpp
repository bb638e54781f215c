// A test "node" in a network namespace of its own, linked to this host by a veth pair on the
// test's own addresses (10.231.N.0/24): taking the link down cuts it off the way a failed switch
// port or cable would. Needs root (and iproute2's `ip`). Test thread only.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace cohort::test {

/// Runs a shell command quietly; true when it exited 0.
inline bool sh(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

/// The namespace at 10.231.N.2, reached from the host at 10.231.N.1. Removed on scope exit.
struct NetnsNode {
  std::string ns, host_if, ns_if, host_ip, ns_ip;
  bool ready = false;

  NetnsNode() {
    int n = 1 + static_cast<int>(::getpid() % 250);
    ns = "cohort_test_" + std::to_string(::getpid());
    host_if = "cth" + std::to_string(::getpid());
    ns_if = "ctn" + std::to_string(::getpid());
    host_ip = "10.231." + std::to_string(n) + ".1";
    ns_ip = "10.231." + std::to_string(n) + ".2";
    ready = sh("ip netns add " + ns) &&
            sh("ip link add " + host_if + " type veth peer name " + ns_if) &&
            sh("ip link set " + ns_if + " netns " + ns) &&
            sh("ip addr add " + host_ip + "/24 dev " + host_if) &&
            sh("ip link set " + host_if + " up") &&
            sh("ip netns exec " + ns + " ip addr add " + ns_ip + "/24 dev " + ns_if) &&
            sh("ip netns exec " + ns + " ip link set " + ns_if + " up") &&
            sh("ip netns exec " + ns + " ip link set lo up");
  }
  ~NetnsNode() {
    sh("ip netns del " + ns);
    sh("ip link del " + host_if);
  }
  NetnsNode(const NetnsNode&) = delete;
  NetnsNode& operator=(const NetnsNode&) = delete;

  /// Cuts the link (`up` false) or puts it back, from the namespace's side: the host keeps its
  /// route to 10.231.N.0/24 (marked linkdown), so nothing sent to the node meanwhile leaves this
  /// machine by the default route, as it would if the host's end were taken down.
  bool set_link(bool up) const {
    return sh("ip netns exec " + ns + " ip link set " + ns_if + (up ? " up" : " down"));
  }
};

}  // namespace cohort::test
