#include "store/store.hpp"

#include <algorithm>
#include <limits>

#include "common/text.hpp"
#include "store/tcpstore_codec.hpp"
#include "store/tcpstore_limits.hpp"

namespace cohort {
namespace {

// A client's key as a refusal (and so the daemon's log) shows it: short, and on one line, so that
// a key cannot forge log lines of its own.
std::string shown_key(std::string_view key) { return one_line(cut_middle(key, 200)); }

// The shape the decoder gives each op; a hand-built request of another shape is refused.
bool well_formed(const StoreRequest& request) {
  size_t keys = request.keys.size();
  size_t values = request.values.size();
  switch (request.op) {
    case StoreOp::Set:
    case StoreOp::Append:
    case StoreOp::QueuePush:
      return keys == 1 && values == 1;
    case StoreOp::CompareSet:
      return keys == 1 && values == 2;
    case StoreOp::Get:
    case StoreOp::Add:
    case StoreOp::WatchKey:
    case StoreOp::DeleteKey:
    case StoreOp::QueuePop:
    case StoreOp::QueueLen:
    case StoreOp::Barrier:
      return keys == 1;
    case StoreOp::MultiSet:
      return keys == values;
    default:
      return true;
  }
}

bool is_c_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// The longest decimal an ADD or BARRIER stores ("-9223372036854775808").
constexpr uint64_t kMaxCounterBytes = 20;

/// What the quota charges for `key` holding a value (or a queue item) of `size` bytes.
uint64_t entry_bytes(const std::string& key, uint64_t size) {
  return key.size() + size + kStoreEntryOverheadBytes;
}

StoreOutcome refuse(std::string reason) { return {true, std::move(reason)}; }

// Whether a buffer of `capacity` holds `size` bytes about as tightly as appending them as they
// arrive would (at most twice, plus a little): the store keeps only such buffers, so what it
// holds stays near what its quota charges.
bool tight(size_t capacity, size_t size) { return capacity <= 2 * size + 64; }

// A string for the store to keep: `string` itself (moved) when its buffer is tight, else a copy.
std::string keep(std::string& string) {
  return tight(string.capacity(), string.size()) ? std::move(string) : std::string(string);
}

// Replaces a stored value without allocating where a buffer fits: the request's (swapped in, the
// old one going back to the request) or the stored one's (copied into).
void replace_value(std::string& stored, std::string& value) {
  if (tight(value.capacity(), value.size())) {
    stored.swap(value);
  } else if (value.size() <= stored.capacity() && tight(stored.capacity(), value.size())) {
    stored.assign(value);
  } else {
    stored = std::string(value);
  }
}

}  // namespace

std::optional<int64_t> parse_store_counter(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && is_c_space(text[i])) ++i;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  if (i == text.size() || !is_digit(text[i])) return std::nullopt;
  // Accumulate negatively so that INT64_MIN parses.
  int64_t value = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    if (__builtin_mul_overflow(value, 10, &value) ||
        __builtin_sub_overflow(value, text[i] - '0', &value)) {
      return std::nullopt;
    }
  }
  if (negative) return value;
  if (value == std::numeric_limits<int64_t>::min()) return std::nullopt;
  return -value;
}

StoreOutcome Store::apply(StoreConnectionId connection, StoreRequest& request,
                          StoreReplies& replies) {
  if (!well_formed(request)) return {true, cat("malformed ", op_name(request.op), " request")};
  uint64_t growth = 0;
  if (StoreOutcome refused = check_limits(request, growth); refused.close_connection) {
    return refused;
  }
  if (StoreOutcome refused = take_from_budget(op_name(request.op), growth);
      refused.close_connection) {
    return refused;
  }
  replies_ = &replies;
  // §5: a connection that sends anything while registered gave up its wait (a timed-out 1.13
  // client sends nothing else); answering that wait later would desynchronise its replies.
  drop_registrations(connection);
  std::string& reply = reply_;
  reply.clear();
  StoreOutcome outcome;
  auto& keys = request.keys;
  auto& values = request.values;
  switch (request.op) {
    case StoreOp::Validate:
      break;
    case StoreOp::Set:
      set_value(keys[0], values[0]);
      break;
    case StoreOp::CompareSet:
      apply_compare_set(request, reply);
      break;
    case StoreOp::Get: {
      auto found = values_.find(keys[0]);
      append_bytes(reply, found == values_.end() ? std::string_view() : found->second);
      break;
    }
    case StoreOp::Add:
      outcome = apply_add(request, reply);
      break;
    case StoreOp::Check: {
      bool ready = std::all_of(keys.begin(), keys.end(), [&](auto& key) { return present(key); });
      append_u8(reply,
                static_cast<uint8_t>(ready ? StoreCheckReply::Ready : StoreCheckReply::NotReady));
      break;
    }
    case StoreOp::Wait:
      apply_wait(connection, request, reply);
      break;
    case StoreOp::GetNumKeys:
      append_i64(reply, static_cast<int64_t>(values_.size()));
      break;
    case StoreOp::WatchKey:
      append_u8(reply, kStoreWatchRegistered);
      break;
    case StoreOp::DeleteKey: {
      auto found = values_.find(keys[0]);
      if (found != values_.end()) {
        used_bytes_ -= entry_bytes(found->first, found->second.size());
        values_.erase(found);
      }
      append_i64(reply, found != values_.end() ? 1 : 0);
      break;
    }
    case StoreOp::Append: {
      auto [entry, created] = values_.try_emplace(keys[0]);
      if (created) used_bytes_ += entry_bytes(entry->first, 0);
      entry->second.append(values[0]);
      used_bytes_ += values[0].size();
      wake(keys[0]);
      break;
    }
    case StoreOp::MultiGet:
      outcome = apply_multi_get(request, reply);
      break;
    case StoreOp::MultiSet:
      for (size_t i = 0; i < keys.size(); ++i) set_value(keys[i], values[i]);
      break;
    case StoreOp::CancelWait:  // the registrations went above; the reply is 1 in every case
      append_u8(reply, static_cast<uint8_t>(StoreWaitReply::WaitCanceled));
      break;
    case StoreOp::Ping:
      append_u32(reply, static_cast<uint32_t>(request.number));
      break;
    case StoreOp::QueuePush: {
      auto [queue, created] = queues_.try_emplace(keys[0]);
      if (created) used_bytes_ += entry_bytes(queue->first, 0);
      used_bytes_ += values[0].size() + kStoreEntryOverheadBytes;
      queue->second.push_back(keep(values[0]));
      wake_one(keys[0]);
      break;
    } break;
    case StoreOp::QueuePop:
      apply_queue_pop(request, reply);
      break;
    case StoreOp::QueueLen:
      append_i64(reply, static_cast<int64_t>(queue_length(keys[0])));
      break;
    case StoreOp::ListKeys:
      outcome = apply_list_keys(reply);
      break;
    case StoreOp::Barrier:
      outcome = apply_barrier(connection, request, reply);
      break;
  }
  if (!reply.empty()) replies.add(connection).swap(reply);
  if (reply_.capacity() > StoreReplies::kKeptBytes) std::string().swap(reply_);
  replies_ = nullptr;
  settle_budget();
  return outcome;
}

void Store::disconnect(StoreConnectionId connection) {
  drop_registrations(connection);
  settle_budget();
}

std::optional<std::string> Store::value(std::string_view key) const {
  auto found = values_.find(std::string(key));
  if (found == values_.end()) return std::nullopt;
  return found->second;
}

size_t Store::queue_length(std::string_view key) const {
  auto found = queues_.find(std::string(key));
  return found == queues_.end() ? 0 : found->second.size();
}

// Refuses, before anything changes, a request that would make a value larger than
// max_value_bytes, a MULTI_SET larger than max_request_bytes, a GET reply larger than
// max_reply_bytes, or the store larger than its quota (wait registrations count: a thousand
// connections waiting on 131072 long keys each would otherwise hold gigabytes). (MULTI_GET and
// LIST_KEYS check their replies as they build them.)
StoreOutcome Store::check_limits(const StoreRequest& request, uint64_t& growth) {
  const auto& keys = request.keys;
  const auto& values = request.values;
  const std::string_view op = op_name(request.op);
  auto value_too_large = [&](uint64_t size) {
    return refuse(cat(op, " would make a value of ", size, " bytes, past the limit of ",
                      limits_.max_value_bytes));
  };
  growth = 0;
  switch (request.op) {
    case StoreOp::Set:
    case StoreOp::CompareSet: {
      uint64_t size = values.back().size();  // SET's value, COMPARE_SET's desired
      if (size > limits_.max_value_bytes) return value_too_large(size);
      growth = growth_to(keys[0], size);
      if (request.op == StoreOp::Set) break;
      uint64_t reply = 8 + compare_set_answer(request).size();
      if (StoreOutcome refused = check_reply(op, reply, growth); refused.close_connection) {
        return refused;
      }
      break;
    }
    case StoreOp::Add:
      growth = growth_to(keys[0], kMaxCounterBytes);
      break;
    case StoreOp::Barrier:  // the counter, and the caller's registration if it waits
      growth = growth_to(keys[0], kMaxCounterBytes) + entry_bytes(keys[0], 0);
      break;
    case StoreOp::Wait:  // each registration on a missing key
      for (const auto& key : keys) growth += present(key) ? 0 : entry_bytes(key, 0);
      break;
    case StoreOp::Append: {
      auto found = values_.find(keys[0]);
      uint64_t size = (found == values_.end() ? 0 : found->second.size()) + values[0].size();
      if (size > limits_.max_value_bytes) return value_too_large(size);
      growth = growth_to(keys[0], size);
      break;
    }
    case StoreOp::MultiSet: {
      uint64_t request_bytes = 0;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (values[i].size() > limits_.max_value_bytes) return value_too_large(values[i].size());
        request_bytes += keys[i].size() + values[i].size();
        growth += growth_to(keys[i], values[i].size());  // an upper bound if a key repeats
      }
      if (request_bytes > limits_.max_request_bytes) {
        return refuse(cat(op, " of ", request_bytes, " bytes, past the limit of ",
                          limits_.max_request_bytes));
      }
      break;
    }
    case StoreOp::QueuePush:
      if (values[0].size() > limits_.max_value_bytes) return value_too_large(values[0].size());
      growth = values[0].size() + kStoreEntryOverheadBytes +
               (queues_.count(keys[0]) > 0 ? 0 : entry_bytes(keys[0], 0));
      break;
    case StoreOp::Get: {
      auto found = values_.find(keys[0]);
      uint64_t reply = 8 + (found == values_.end() ? 0 : found->second.size());
      if (StoreOutcome refused = check_reply(op, reply); refused.close_connection) return refused;
      break;
    }
    default:
      break;
  }
  uint64_t after = used_bytes_ + held_bytes_ + growth;
  if (growth > 0 && after > limits_.quota_bytes) {
    return refuse(cat(
        op, " would take the store to ", after, " bytes (", held_bytes_,
        " of them held for requests still arriving and replies not yet read), past its quota of ",
        limits_.quota_bytes));
  }
  return {};
}

// A reply keeps to max_reply_bytes and, when larger than what a connection may leave unread
// uncharged, fits in the quota's room (beside the request's `growth`) and is taken from the
// budget at once (other stores check theirs on other threads): its session charges it in the
// same critical section (hold_reply), until the client reads it.
StoreOutcome Store::check_reply(std::string_view op, uint64_t reply_bytes, uint64_t growth) {
  if (reply_bytes > limits_.max_reply_bytes) {
    return refuse(
        cat(op, " reply of ", reply_bytes, " bytes, past the limit of ", limits_.max_reply_bytes));
  }
  uint64_t after = used_bytes_ + held_bytes_ + growth + reply_bytes;
  if (reply_bytes > kStoreUnchargedReplyBytes && after > limits_.quota_bytes) {
    return refuse(cat(op, " reply of ", reply_bytes, " bytes would take the store to ", after,
                      " bytes (", held_bytes_ + reply_bytes,
                      " of them held for requests still arriving and replies not yet read), past "
                      "its quota of ",
                      limits_.quota_bytes));
  }
  if (reply_bytes <= kStoreUnchargedReplyBytes || !budget_.budget()) return {};
  const ByteBudget& budget = *budget_.budget();
  if (growth + reply_bytes > budget.room() || !budget_.grow(reply_bytes)) {
    return refuse(past_budget(cat(op, " reply of ", reply_bytes, " bytes"), reply_bytes));
  }
  reply_reserve_ += reply_bytes;
  return {};
}

StoreOutcome Store::take_from_budget(std::string_view op, uint64_t growth) {
  if (growth == 0 || budget_.grow(growth)) return {};
  return refuse(past_budget(op, growth));
}

void Store::settle_budget() { budget_.resize(used_bytes_ + held_bytes_ + reply_reserve_); }

std::string Store::past_budget(std::string_view what, uint64_t bytes) const {
  return cat(what, " would take the worker stores past their budget of ", budget_.budget()->limit(),
             " bytes (--store-budget): ", bytes, " more, with ", budget_.budget()->used(),
             " held by all stores now");
}

std::string Store::charge_held(uint64_t bytes) {
  uint64_t after = used_bytes_ + held_bytes_ + bytes;
  if (after > limits_.quota_bytes) {
    return cat(
        "the bytes it declares would take the store to ", after, " bytes (", held_bytes_ + bytes,
        " of them held for requests still arriving and replies not yet read), past its quota of ",
        limits_.quota_bytes);
  }
  if (StoreOutcome refused = take_from_budget("the bytes it declares", bytes);
      refused.close_connection) {
    return refused.reason;
  }
  held_bytes_ += bytes;
  return {};
}

void Store::release_held(uint64_t bytes) {
  held_bytes_ -= std::min(bytes, held_bytes_);
  settle_budget();
}

void Store::hold(uint64_t bytes) {
  held_bytes_ += bytes;
  settle_budget();
}

void Store::hold_reply(uint64_t bytes) {
  if (bytes == 0 && reply_reserve_ == 0) return;
  held_bytes_ += bytes;
  reply_reserve_ = 0;
  settle_budget();
}

// How many bytes the quota would grow by if `key` held a value of `value_size` bytes (0 if it
// would shrink or stay).
uint64_t Store::growth_to(const std::string& key, uint64_t value_size) const {
  uint64_t after = entry_bytes(key, value_size);
  auto found = values_.find(key);
  uint64_t before = found == values_.end() ? 0 : entry_bytes(found->first, found->second.size());
  return after > before ? after - before : 0;
}

StoreOutcome Store::apply_add(StoreRequest& request, std::string& reply) {
  std::string& key = request.keys[0];
  int64_t result = request.number;
  auto found = values_.find(key);
  if (found != values_.end()) {
    auto current = parse_store_counter(found->second);
    if (!current)
      return {true, cat("ADD on key '", shown_key(key), "' whose value is not an integer")};
    if (__builtin_add_overflow(*current, request.number, &result)) {
      return {true, cat("ADD on key '", shown_key(key), "' overflows")};
    }
  }
  std::string counter = std::to_string(result);
  set_value(key, counter);
  append_i64(reply, result);
  return {};
}

StoreOutcome Store::apply_multi_get(const StoreRequest& request, std::string& reply) {
  std::vector<const std::string*> found_values;
  found_values.reserve(request.keys.size());
  uint64_t total = 0;
  for (const auto& key : request.keys) {
    auto found = values_.find(key);
    found_values.push_back(found == values_.end() ? nullptr : &found->second);
    total += 8 + (found == values_.end() ? 0 : found->second.size());
  }
  if (StoreOutcome refused = check_reply("MULTI_GET", total); refused.close_connection) {
    return refused;
  }
  reply.reserve(total);
  for (const std::string* value : found_values) {
    append_bytes(reply, value ? std::string_view(*value) : std::string_view());
  }
  return {};
}

// BARRIER: ADD +1 without waking; the arrival that reaches world_size wakes the others.
StoreOutcome Store::apply_barrier(StoreConnectionId connection, StoreRequest& request,
                                  std::string& reply) {
  std::string& key = request.keys[0];
  int64_t count = 1;
  auto found = values_.find(key);
  if (found != values_.end()) {
    auto current = parse_store_counter(found->second);
    if (!current || __builtin_add_overflow(*current, 1, &count)) {
      return {true, cat("BARRIER on key '", shown_key(key), "' whose value is not a counter")};
    }
  }
  std::string counter = std::to_string(count);
  const std::string& stored_key = put(key, counter);
  if (count >= request.number) {
    wake(stored_key);
    append_u8(reply, static_cast<uint8_t>(StoreWaitReply::StopWaiting));
  } else {
    register_wait(connection, stored_key);
  }
  return {};
}

// §3: absent + empty expected creates; absent + non-empty expected answers `expected` unchanged;
// present + equal swaps; present + different answers the current value. So the answer is
// `desired` exactly when it is stored.
const std::string& Store::compare_set_answer(const StoreRequest& request) const {
  const std::string& expected = request.values[0];
  const std::string& desired = request.values[1];
  auto found = values_.find(request.keys[0]);
  if (found == values_.end()) return expected.empty() ? desired : expected;
  return found->second == expected ? desired : found->second;
}

void Store::apply_compare_set(StoreRequest& request, std::string& reply) {
  const std::string& answer = compare_set_answer(request);
  append_bytes(reply, answer);
  std::string& desired = request.values[1];
  if (&answer == &desired) set_value(request.keys[0], desired);
}

void Store::apply_wait(StoreConnectionId connection, const StoreRequest& request,
                       std::string& reply) {
  for (const auto& key : request.keys) {
    if (!present(key)) register_wait(connection, key);
  }
  if (!is_waiting(connection)) {
    append_u8(reply, static_cast<uint8_t>(StoreWaitReply::StopWaiting));
  }
}

void Store::apply_queue_pop(const StoreRequest& request, std::string& reply) {
  auto found = queues_.find(request.keys[0]);
  if (found == queues_.end()) {
    append_i64(reply, 0);
    return;
  }
  auto& queue = found->second;
  append_i64(reply, static_cast<int64_t>(queue.size()));
  append_bytes(reply, queue.front());
  used_bytes_ -= queue.front().size() + kStoreEntryOverheadBytes;
  queue.pop_front();
  if (queue.empty()) {
    used_bytes_ -= entry_bytes(found->first, 0);
    queues_.erase(found);
  }
}

// In the map's order (the protocol promises none): sorting millions of keys would hold the
// store's lock for seconds.
StoreOutcome Store::apply_list_keys(std::string& reply) {
  uint64_t total = 8;
  for (const auto& entry : values_) total += 8 + entry.first.size();
  if (StoreOutcome refused = check_reply("LIST_KEYS", total); refused.close_connection) {
    return refused;
  }
  reply.reserve(total);
  append_i64(reply, static_cast<int64_t>(values_.size()));
  for (const auto& entry : values_) append_bytes(reply, entry.first);
  return {};
}

const std::string& Store::put(std::string& key, std::string& value) {
  auto found = values_.find(key);
  if (found != values_.end()) {
    used_bytes_ = used_bytes_ - found->second.size() + value.size();
    replace_value(found->second, value);
    return found->first;
  }
  used_bytes_ += entry_bytes(key, value.size());
  return values_.emplace(keep(key), keep(value)).first->first;
}

void Store::set_value(std::string& key, std::string& value) { wake(put(key, value)); }

// Queues are emptied away, so a queue entry means a non-empty queue.
bool Store::present(const std::string& key) const {
  return values_.count(key) > 0 || queues_.count(key) > 0;
}

void Store::register_wait(StoreConnectionId connection, const std::string& key) {
  auto [waiting, created] = waiting_.try_emplace(connection);
  if (created) waiting->second.serial = ++last_wait_serial_;
  waiters_[key].push_back({connection, waiting->second.serial});
  const uint64_t bytes = entry_bytes(key, 0);
  ++registrations_;
  registration_bytes_ += bytes;
  ++waiting->second.outstanding;
  waiting->second.outstanding_bytes += bytes;
  waiting->second.charged += bytes;
  used_bytes_ += bytes;
}

Store::Waiting* Store::live_wait(const Registration& registration) {
  auto waiting = waiting_.find(registration.connection);
  if (waiting == waiting_.end() || waiting->second.serial != registration.serial) return nullptr;
  return &waiting->second;
}

void Store::wake(const std::string& key) {
  auto found = waiters_.find(key);
  if (found == waiters_.end()) return;
  const uint64_t bytes = entry_bytes(key, 0);
  std::vector<Registration> registrations = std::move(found->second);
  waiters_.erase(found);
  registrations_ -= registrations.size();
  registration_bytes_ -= registrations.size() * bytes;
  for (const Registration& registration : registrations) {
    Waiting* waiting = live_wait(registration);
    if (waiting == nullptr) {
      --stale_;
      stale_bytes_ -= bytes;
    } else if (count_down(*waiting, bytes)) {
      release(registration.connection);
    }
  }
}

void Store::wake_one(const std::string& key) {
  auto found = waiters_.find(key);
  if (found == waiters_.end()) return;
  const uint64_t bytes = entry_bytes(key, 0);
  auto& registrations = found->second;
  size_t used = 0;
  while (used < registrations.size()) {
    const Registration& registration = registrations[used++];
    Waiting* waiting = live_wait(registration);
    if (waiting == nullptr) {
      --stale_;
      stale_bytes_ -= bytes;
    } else if (count_down(*waiting, bytes)) {
      release(registration.connection);
      break;
    }
  }
  registrations.erase(registrations.begin(), registrations.begin() + used);
  registrations_ -= used;
  registration_bytes_ -= used * bytes;
  if (registrations.empty()) waiters_.erase(found);
}

// Every registration of `connection` has been counted down: answer its WAIT (or BARRIER).
void Store::release(StoreConnectionId connection) {
  erase_waiting(waiting_.find(connection));
  append_u8(replies_->add(connection), static_cast<uint8_t>(StoreWaitReply::StopWaiting));
}

void Store::drop_registrations(StoreConnectionId connection) {
  auto waiting = waiting_.find(connection);
  if (waiting == waiting_.end()) return;
  stale_ += waiting->second.outstanding;
  stale_bytes_ += waiting->second.outstanding_bytes;
  erase_waiting(waiting);
  if (stale_registrations_prevail()) sweep_stale_registrations();
}

// Counting entries alone would let a connection holding many live registrations on a short key
// keep stale ones on 64 KiB keys, which the quota no longer counts, by the gigabyte; counting
// bytes alone would let a wait naming one key 131072 times be rescanned at every wait given up.
bool Store::stale_registrations_prevail() const {
  constexpr size_t kStaleKept = 4096;
  constexpr uint64_t kStaleBytesKept = kStaleKept * kStoreEntryOverheadBytes;
  const size_t live = registrations_ - stale_;
  const uint64_t live_bytes = registration_bytes_ - stale_bytes_;
  return (stale_ > kStaleKept && stale_ > live) ||
         (stale_bytes_ > kStaleBytesKept && stale_bytes_ > live_bytes);
}

// One pass removes every stale entry. It visits the live ones too, but only once the stale ones
// outnumber them, or outweigh them in bytes (every entry weighs at least
// kStoreEntryOverheadBytes): a sweep visits at most one live entry per stale entry it removes, or
// per kStoreEntryOverheadBytes they held; a constant per key the given-up WAITs sent.
void Store::sweep_stale_registrations() {
  for (auto key = waiters_.begin(); key != waiters_.end();) {
    std::erase_if(key->second, [&](const Registration& entry) { return !live_wait(entry); });
    key = key->second.empty() ? waiters_.erase(key) : std::next(key);
  }
  registrations_ -= stale_;
  registration_bytes_ -= stale_bytes_;
  stale_ = 0;
  stale_bytes_ = 0;
}

bool Store::count_down(Waiting& waiting, uint64_t bytes) {
  waiting.outstanding_bytes -= bytes;
  return --waiting.outstanding == 0;
}

void Store::erase_waiting(std::unordered_map<StoreConnectionId, Waiting>::iterator waiting) {
  if (waiting == waiting_.end()) return;
  used_bytes_ -= waiting->second.charged;
  waiting_.erase(waiting);
}

}  // namespace cohort
