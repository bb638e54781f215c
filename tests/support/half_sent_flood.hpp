// A flood of half-sent HTTP requests, as an attacker on the same host makes them: on its own
// thread, until destroyed (60 s at most), every 25 ms a connection from 127.0.0.1 to
// 127.0.0.1:port that sends `first_line` and never the rest of the header. It holds its
// connections until the server closes them. Owned by a test; its thread alone touches them.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace cohort::test {

class HalfSentFlood {
 public:
  explicit HalfSentFlood(uint16_t port, std::string first_line = "GET /metrics HTTP/1.1\r\n")
      : first_line_(std::move(first_line)), thread_([this, port] { run(port); }) {}
  ~HalfSentFlood() {
    stop_ = true;
    thread_.join();
    for (int fd : held_) ::close(fd);
  }
  HalfSentFlood(const HalfSentFlood&) = delete;
  HalfSentFlood& operator=(const HalfSentFlood&) = delete;

  /// Connections made and half-sent so far.
  size_t sent() const { return sent_; }

 private:
  void run(uint16_t port) {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!stop_ && std::chrono::steady_clock::now() < until) {
      open_one(port);
      drop_closed();
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  void open_one(uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 ||
        ::send(fd, first_line_.data(), first_line_.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(first_line_.size())) {
      ::close(fd);
      return;
    }
    held_.push_back(fd);
    ++sent_;
  }
  // Closes the connections the server closed (readable: only its close can come).
  void drop_closed() {
    std::vector<pollfd> polled;
    for (int fd : held_) polled.push_back({fd, POLLIN, 0});
    if (::poll(polled.data(), polled.size(), 0) <= 0) return;
    held_.clear();
    for (const pollfd& each : polled) {
      if (each.revents != 0) {
        ::close(each.fd);
      } else {
        held_.push_back(each.fd);
      }
    }
  }

  std::string first_line_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> sent_{0};
  std::vector<int> held_;
  std::thread thread_;
};

}  // namespace cohort::test
