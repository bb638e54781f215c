// An acceptor out of file descriptors (EMFILE, ENFILE): the pending connection cannot be accepted,
// so its client would hang in the listen queue. A descriptor kept in reserve is given up for a
// moment to accept that connection and close it at once (the client sees its connection closed
// and can retry or fail), then taken back. Says so once per shortage, naming the limit and how to
// raise it, and once when it ends, with how many connections were refused. The connections
// already in keep working. Owned by the owner of one acceptor (daemon) or shared by the
// acceptors of one server on several threads (a store's listeners): each call from any thread.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace cohort {

class DescriptorShortage {
 public:
  /// `who` starts the log lines ("rendezvous", "store").
  explicit DescriptorShortage(std::string who);
  ~DescriptorShortage();
  DescriptorShortage(const DescriptorShortage&) = delete;
  DescriptorShortage& operator=(const DescriptorShortage&) = delete;

  /// After an accept failed for want of descriptors (which it may do with nothing pending):
  /// refuses one pending connection and calls `accept_again`; with nothing pending, calls it
  /// once one is; without a reserve descriptor, calls `back_off` (wait a while, then accept).
  void refuse_pending(boost::asio::ip::tcp::acceptor& acceptor,
                      const std::function<void()>& accept_again,
                      const std::function<void()>& back_off);
  /// A connection was accepted: a shortage under way has ended.
  void accepted();

 private:
  void take_reserve();

  std::string who_;
  std::mutex mutex_;  ///< guards the reserve and the count
  int reserve_ = -1;
  std::atomic<bool> short_{false};
  uint64_t refused_ = 0;  ///< in the shortage under way
};

/// The advice a shortage is worth: the soft limit and how to raise it.
std::string descriptor_limit_advice();

}  // namespace cohort
