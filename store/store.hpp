// The worker store's state: PyTorch TCPStore semantics (docs/tcpstore-protocol.md §3, §5) over
// keys, values, queues and wait registrations. Pure: no sockets, no clock. A request from a
// connection (an opaque id) goes in; the encoded replies for that connection and for any waiter
// it woke come out, for the server to write. Owned by StoreServer; io_context thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/tcpstore_request.hpp"

namespace cohort {

using StoreConnectionId = uint64_t;

struct StoreReply {
  StoreConnectionId connection = 0;
  std::string bytes;  ///< append to that connection's output, in the order given
};

struct StoreOutcome {
  bool close_connection = false;  ///< the request was invalid (bad ADD counter): close it
  std::string reason;
};

class Store {
 public:
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Applies one request. Replies are appended to `replies` (the caller clears it).
  StoreOutcome apply(StoreConnectionId connection, StoreRequest&& request,
                     std::vector<StoreReply>& replies);
  /// Drops the wait registrations of a closed connection.
  void disconnect(StoreConnectionId connection);

  size_t num_keys() const { return values_.size(); }
  std::optional<std::string> value(std::string_view key) const;
  size_t queue_length(std::string_view key) const;
  /// True while `connection` has an unanswered WAIT or BARRIER.
  bool is_waiting(StoreConnectionId connection) const { return waiting_.count(connection) > 0; }
  size_t waiting_connections() const { return waiting_.size(); }

 private:
  struct Waiting {
    size_t outstanding = 0;
    std::vector<std::string> keys;  ///< every key registered, for dropping the registrations
  };

  StoreOutcome apply_add(const StoreRequest& request, std::string& reply);
  StoreOutcome apply_barrier(StoreConnectionId connection, const StoreRequest& request,
                             std::string& reply);
  StoreOutcome apply_multi_get(const StoreRequest& request, std::string& reply) const;
  void apply_compare_set(StoreRequest& request, std::string& reply);
  void apply_wait(StoreConnectionId connection, const StoreRequest& request, std::string& reply);
  void apply_queue_pop(const StoreRequest& request, std::string& reply);
  void apply_list_keys(std::string& reply) const;
  void set_value(std::string key, std::string value);
  bool present(const std::string& key) const;
  void register_wait(StoreConnectionId connection, const std::string& key);
  /// Wake(key) of §3: every registration on `key` counts down; zero sends STOP_WAITING.
  void wake(const std::string& key);
  /// QUEUE_PUSH's wake: registrations count down in order until one waiter is released.
  void wake_one(const std::string& key);
  void release(StoreConnectionId connection);
  void drop_registrations(StoreConnectionId connection);

  std::unordered_map<std::string, std::string> values_;
  std::unordered_map<std::string, std::deque<std::string>> queues_;
  /// key -> one entry per registration (a connection waiting twice on a key appears twice).
  std::unordered_map<std::string, std::vector<StoreConnectionId>> waiters_;
  std::unordered_map<StoreConnectionId, Waiting> waiting_;
  std::vector<StoreReply>* replies_ = nullptr;  ///< apply()'s output while it runs
};

/// The counter rule of ADD: C strtoll base 10 (leading blanks, optional sign, trailing junk
/// ignored); nullopt when there are no digits or the value is out of range.
std::optional<int64_t> parse_store_counter(std::string_view text);

}  // namespace cohort
