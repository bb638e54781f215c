// The worker store's state: PyTorch TCPStore semantics (docs/tcpstore-protocol.md §3, §5) over
// keys, values, queues and wait registrations. Pure: no sockets, no clock. A request from a
// connection (an opaque id) goes in; the encoded replies for that connection and for any waiter
// it woke come out, for the server to write. Enforces StoreLimits: a request that would take the
// store past its quota, make a value or a reply too large, is refused and its connection closed.
// Owned by StoreServer; io_context thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/byte_budget.hpp"
#include "store/store_replies.hpp"
#include "store/tcpstore_limits.hpp"
#include "store/tcpstore_request.hpp"

namespace cohort {

struct StoreOutcome {
  /// The request was invalid (bad ADD counter) or past a limit, and was not applied: close it.
  bool close_connection = false;
  std::string reason;
};

class Store {
 public:
  /// `budget`, when given, is shared with the process's other stores: this one takes its growth
  /// from it as well as from its own quota, and gives back all it took when destroyed.
  explicit Store(StoreLimits limits = {}, std::shared_ptr<ByteBudget> budget = nullptr)
      : limits_(limits), budget_(std::move(budget)) {}
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Applies one request. Replies are added to `replies` (the caller clears it). The store may
  /// take the request's strings, or swap them for buffers it no longer needs (for the decoder
  /// to reuse): a SET, GET or ADD of a key that exists allocates nothing.
  StoreOutcome apply(StoreConnectionId connection, StoreRequest& request, StoreReplies& replies);
  /// Drops the wait registrations of a closed connection.
  void disconnect(StoreConnectionId connection);

  size_t num_keys() const { return values_.size(); }
  /// What the quota counts now: keys, values, queue items and wait registrations,
  /// kStoreEntryOverheadBytes each.
  uint64_t used_bytes() const { return used_bytes_; }
  /// Bytes the connections hold (what requests still arriving declared, replies not yet read):
  /// `bytes` more count against the quota (and the budget) from now on. Returns why not (nothing
  /// charged) when that would take the store past its quota or the stores past their budget.
  std::string charge_held(uint64_t bytes);
  /// Returns what charge_held took (the request completed, the client read its replies, or its
  /// connection closed).
  void release_held(uint64_t bytes);
  /// Replies already made and not yet read: `bytes` more count against the quota, past it or
  /// not (only large replies are held, and they were checked against its room before they were
  /// made; see check_reply).
  void hold(uint64_t bytes);
  /// After apply, in the same critical section: what the reply just made adds to its connection's
  /// unread bytes (`bytes`, maybe 0) is held, and the budget that check_reply set aside for the
  /// reply is let go. No other thread's request can slip between the check and the charge.
  void hold_reply(uint64_t bytes);
  /// What the connections' requests and replies have charged.
  uint64_t held_bytes() const { return held_bytes_; }
  const StoreLimits& limits() const { return limits_; }
  std::optional<std::string> value(std::string_view key) const;
  size_t queue_length(std::string_view key) const;
  /// True while `connection` has an unanswered WAIT or BARRIER.
  bool is_waiting(StoreConnectionId connection) const { return waiting_.count(connection) > 0; }
  size_t waiting_connections() const { return waiting_.size(); }
  /// Registrations kept in the keys' lists, those of waits given up included.
  size_t registration_entries() const { return registrations_; }
  /// What those registrations take (their keys, kStoreEntryOverheadBytes each), stale included.
  uint64_t registration_bytes() const { return registration_bytes_; }

 private:
  /// A connection's unanswered WAIT (or BARRIER).
  struct Waiting {
    uint64_t serial = 0;             ///< names this wait in its registrations; unique in the store
    size_t outstanding = 0;          ///< its registrations still in waiters_
    uint64_t outstanding_bytes = 0;  ///< what they take (they turn stale if it is given up)
    uint64_t charged = 0;            ///< what all its registrations count against the quota
  };
  /// One key of a wait, in the key's list. Stale once that wait is gone (given up, closed): its
  /// connection then has no Waiting with `serial`. Stale entries are skipped when the key is set
  /// and swept out once they outnumber, or outweigh in bytes, the live ones, so that giving up a
  /// wait costs nothing per key (a WAIT may name one key 131072 times, with thousands of others
  /// waiting on it). The quota no longer counts them, but they never take more than the live
  /// registrations it does count (and a few hundred KiB).
  struct Registration {
    StoreConnectionId connection;
    uint64_t serial;
  };

  /// Refuses a request past a limit or the quota; sets `growth` to what it may add to the quota.
  StoreOutcome check_limits(const StoreRequest& request, uint64_t& growth);
  /// Takes `growth` from the budget before a request grows the store (settle_budget squares it).
  StoreOutcome take_from_budget(std::string_view op, uint64_t growth);
  /// Makes what this store has taken from the budget equal what its quota counts now.
  void settle_budget();
  std::string past_budget(std::string_view what, uint64_t bytes) const;
  StoreOutcome check_reply(std::string_view op, uint64_t reply_bytes, uint64_t growth = 0);
  const std::string& compare_set_answer(const StoreRequest& request) const;
  uint64_t growth_to(const std::string& key, uint64_t value_size) const;
  StoreOutcome apply_add(StoreRequest& request, std::string& reply);
  StoreOutcome apply_barrier(StoreConnectionId connection, StoreRequest& request,
                             std::string& reply);
  StoreOutcome apply_multi_get(const StoreRequest& request, std::string& reply);
  StoreOutcome apply_list_keys(std::string& reply);
  void apply_compare_set(StoreRequest& request, std::string& reply);
  void apply_wait(StoreConnectionId connection, const StoreRequest& request, std::string& reply);
  void apply_queue_pop(const StoreRequest& request, std::string& reply);
  /// Stores `value` at `key` (the quota follows) without waking; set_value also wakes. Either
  /// string may be taken, or swapped for a buffer the store no longer needs. Returns the key as
  /// stored.
  const std::string& put(std::string& key, std::string& value);
  void set_value(std::string& key, std::string& value);
  bool present(const std::string& key) const;
  void register_wait(StoreConnectionId connection, const std::string& key);
  /// Wake(key) of §3: every registration on `key` counts down; zero sends STOP_WAITING.
  void wake(const std::string& key);
  /// QUEUE_PUSH's wake: registrations count down in order until one waiter is released.
  void wake_one(const std::string& key);
  void release(StoreConnectionId connection);
  /// A registration of `waiting`'s, of `bytes`, was counted down: true when it was the last.
  static bool count_down(Waiting& waiting, uint64_t bytes);
  /// The live wait `registration` belongs to; null when it is stale.
  Waiting* live_wait(const Registration& registration);
  /// Forgets `connection`'s Waiting and what it charged.
  void erase_waiting(std::unordered_map<StoreConnectionId, Waiting>::iterator waiting);
  /// The connection gave up its wait (or closed): its registrations turn stale.
  void drop_registrations(StoreConnectionId connection);
  /// True once the stale entries outnumber or outweigh the live ones (beyond a few thousand).
  bool stale_registrations_prevail() const;
  void sweep_stale_registrations();

  std::unordered_map<std::string, std::string> values_;
  std::unordered_map<std::string, std::deque<std::string>> queues_;
  /// key -> one entry per registration, in order (a wait naming a key twice appears twice).
  std::unordered_map<std::string, std::vector<Registration>> waiters_;
  std::unordered_map<StoreConnectionId, Waiting> waiting_;
  uint64_t last_wait_serial_ = 0;
  size_t registrations_ = 0;         ///< entries in waiters_, live and stale
  size_t stale_ = 0;                 ///< of them, stale
  uint64_t registration_bytes_ = 0;  ///< what the entries in waiters_ take, live and stale
  uint64_t stale_bytes_ = 0;         ///< of it, what the stale ones take
  StoreReplies* replies_ = nullptr;  ///< apply()'s output while it runs
  std::string reply_;                ///< apply()'s reply to the caller, its buffer kept
  StoreLimits limits_;
  uint64_t used_bytes_ = 0;
  uint64_t held_bytes_ = 0;  ///< charged by requests still arriving and replies not yet read
  BudgetShare budget_;       ///< without a budget only the quota bounds this store
  /// Budget taken by check_reply for a large reply being made, until hold_reply charges it.
  uint64_t reply_reserve_ = 0;
};

/// The counter rule of ADD: C strtoll base 10 (leading blanks, optional sign, trailing junk
/// ignored); nullopt when there are no digits or the value is out of range.
std::optional<int64_t> parse_store_counter(std::string_view text);

}  // namespace cohort
