// Reading a Python pickle that someone else wrote (a worker's NCCL flight-recorder dump) as a
// tree of plain values, never as objects: only the opcodes of None, bools, ints, floats, strings,
// lists, tuples and dicts are read, and GLOBAL, REDUCE, BUILD and the like are an error. Every
// length, count and depth is checked against the bytes left and the reader's limits before
// anything is allocated from it, so a corrupt, truncated or hostile input gives an error string,
// in time linear in its size. Pure; a PickleReader holds only its limits: any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace cohort::observe {

class PickleValue;
using PickleList = std::vector<PickleValue>;  ///< a list or a tuple
using PickleKey = std::variant<int64_t, std::string>;
/// A dict's items in the order they were set; a key set twice is there twice (get finds the last).
using PickleDict = std::vector<std::pair<PickleKey, PickleValue>>;

/// One value of the tree: None, bool, int (64 bits), float, str, list (tuples too) or dict.
class PickleValue {
 public:
  using Storage =
      std::variant<std::monostate, bool, int64_t, double, std::string, PickleList, PickleDict>;

  PickleValue() = default;
  explicit PickleValue(Storage storage) : storage_(std::move(storage)) {}

  bool is_none() const { return std::holds_alternative<std::monostate>(storage_); }
  const bool* as_bool() const { return std::get_if<bool>(&storage_); }
  const int64_t* as_int() const { return std::get_if<int64_t>(&storage_); }
  const double* as_float() const { return std::get_if<double>(&storage_); }
  const std::string* as_string() const { return std::get_if<std::string>(&storage_); }
  const PickleList* as_list() const { return std::get_if<PickleList>(&storage_); }
  const PickleDict* as_dict() const { return std::get_if<PickleDict>(&storage_); }
  /// The value under `key` (the last one set, as Python keeps it); nullptr when this is not a
  /// dict or has no such key.
  const PickleValue* get(std::string_view key) const;
  const PickleValue* get(int64_t key) const;

  const Storage& storage() const { return storage_; }
  Storage& storage() { return storage_; }

 private:
  Storage storage_;
};

/// What a reader accepts at most. A memoized value used N times counts N times.
struct PickleLimits {
  size_t max_input_bytes = size_t{64} << 20;
  int max_depth = 64;             ///< lists and dicts inside each other (the top one is 1)
  size_t max_values = 4'000'000;  ///< values in the tree, and items on the stack or in containers
  size_t max_memo_entries = 1'000'000;
  size_t max_string_bytes = size_t{256} << 20;  ///< all strings of the tree together
};

/// The tree, or why there is none.
struct PickleResult {
  std::optional<PickleValue> value;
  std::string error;  ///< "byte 12: ...", empty when `value` is set
  bool ok() const { return value.has_value(); }
};

class PickleReader {
 public:
  explicit PickleReader(PickleLimits limits = {}) : limits_(limits) {}
  /// The value `bytes` pickles (up to its STOP opcode; bytes after it are ignored).
  PickleResult read(std::string_view bytes) const;

 private:
  PickleLimits limits_;
};

}  // namespace cohort::observe
