// A siege of silent connections, for tests of the caps on strangers (the control port, the HTTP
// port): many loopback addresses, each holding some connections that never send a byte, kept up
// by a thread of its own. Test thread and its own thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/fd_limit.hpp"

namespace cohort::test {

// Silent connections from `per_address` sockets on each of `addresses` loopback addresses to
// 127.0.0.1:port, kept up by a thread of their own: one the server closes is opened again (every
// 200 ms), as a determined attacker would. Closes them all when destroyed.
class SilentSiege {
 public:
  SilentSiege(int port, int addresses, int per_address, int first_octet = 1)
      : port_(port), first_octet_(first_octet) {
    cohort::raise_fd_limit();  // a thousand sockets: past a default soft limit of 1024
    for (int a = 0; a < addresses; ++a) {
      for (int i = 0; i < per_address; ++i) {
        std::string from =
            "127.0." + std::to_string(first_octet_ + a / 250) + "." + std::to_string(a % 250 + 1);
        held_.push_back({from, open_from(from)});
      }
    }
    thread_ = std::thread([this] { keep_up(); });
  }
  ~SilentSiege() {
    stop_ = true;
    thread_.join();
    for (auto& [from, fd] : held_) ::close(fd);
  }
  size_t reopened() const { return reopened_; }

 private:
  int open_from(const std::string& source) const {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    (void)::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port_));
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);  // in progress
    return fd;
  }
  // Reads what the server sent (a challenge); true once it closed the connection.
  static bool closed(int fd) {
    char buffer[4096];
    for (;;) {
      ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n > 0) continue;
      return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINPROGRESS);
    }
  }
  void keep_up() {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      for (auto& [from, fd] : held_) {
        if (stop_ || !closed(fd)) continue;
        ::close(fd);
        fd = open_from(from);
        ++reopened_;
      }
    }
  }

  int port_;
  int first_octet_;
  std::vector<std::pair<std::string, int>> held_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> reopened_{0};
  std::thread thread_;
};

}  // namespace cohort::test
