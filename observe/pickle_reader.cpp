#include "observe/pickle_reader.hpp"

#include <algorithm>
#include <bit>
#include <tuple>
#include <unordered_map>

#include "common/text.hpp"

namespace cohort::observe {

const PickleValue* PickleValue::get(std::string_view key) const {
  const PickleDict* dict = as_dict();
  if (dict == nullptr) return nullptr;
  for (auto item = dict->rbegin(); item != dict->rend(); ++item) {
    const std::string* text = std::get_if<std::string>(&item->first);
    if (text != nullptr && *text == key) return &item->second;
  }
  return nullptr;
}

const PickleValue* PickleValue::get(int64_t key) const {
  const PickleDict* dict = as_dict();
  if (dict == nullptr) return nullptr;
  for (auto item = dict->rbegin(); item != dict->rend(); ++item) {
    const int64_t* number = std::get_if<int64_t>(&item->first);
    if (number != nullptr && *number == key) return &item->second;
  }
  return nullptr;
}

namespace {

// The opcodes read, by the names pickletools gives them.
enum Opcode : uint8_t {
  kMark = '(',
  kStop = '.',
  kPop = '0',
  kPopMark = '1',
  kDup = '2',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinFloat = 'G',
  kBinString = 'T',
  kShortBinString = 'U',
  kBinUnicode = 'X',
  kAppend = 'a',
  kAppends = 'e',
  kDict = 'd',
  kEmptyDict = '}',
  kList = 'l',
  kEmptyList = ']',
  kTuple = 't',
  kEmptyTuple = ')',
  kSetItem = 's',
  kSetItems = 'u',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kProto = 0x80,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kLong4 = 0x8b,
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kMemoize = 0x94,
  kFrame = 0x95,
};

// Opcodes that import, call or build objects: never run, and named in the error.
const char* object_opcode_name(uint8_t op) {
  switch (op) {
    case 'c':
      return "GLOBAL";
    case 0x93:
      return "STACK_GLOBAL";
    case 'R':
      return "REDUCE";
    case 'b':
      return "BUILD";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    default:
      return nullptr;
  }
}

enum class Kind : uint8_t { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict };

// A value while reading: containers hold node indices, so that a memoized container that is
// appended to later (as Python's pickler writes) is seen through every reference to it.
struct Node {
  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string_view text;        // into the input
  std::vector<uint32_t> items;  // a list's or tuple's values; a dict's keys and values in turn
};

class Parser {
 public:
  Parser(std::string_view in, PickleLimits limits) : in_(in), limits_(limits) {
    // Nodes are indexed by uint32_t.
    limits_.max_values = std::min<size_t>(limits_.max_values, UINT32_MAX - 1);
  }

  PickleResult run() {
    PickleResult result;
    std::optional<uint32_t> top = parse();
    if (!top) {
      result.error = error_;
      return result;
    }
    PickleValue value;
    if (!convert(*top, 1, value)) {
      result.error = error_;
      return result;
    }
    result.value = std::move(value);
    return result;
  }

 private:
  bool fail(std::string message) {
    if (error_.empty()) error_ = cat("byte ", op_at_, ": ", message);
    return false;
  }

  bool need(size_t bytes, const char* what) {
    if (in_.size() - pos_ >= bytes) return true;
    return fail(cat(what, " needs ", bytes, " bytes, ", in_.size() - pos_, " left (truncated)"));
  }

  uint64_t read_le(size_t bytes) {
    uint64_t value = 0;
    for (size_t i = 0; i < bytes; ++i) {
      value |= uint64_t{static_cast<uint8_t>(in_[pos_ + i])} << (8 * i);
    }
    pos_ += bytes;
    return value;
  }

  bool new_node(Node node) {
    if (nodes_.size() >= limits_.max_values) {
      return fail(cat("more than ", limits_.max_values, " values"));
    }
    nodes_.push_back(std::move(node));
    return push(static_cast<uint32_t>(nodes_.size() - 1));
  }

  bool push(uint32_t index) {
    if (stack_.size() >= limits_.max_values) {
      return fail(cat("more than ", limits_.max_values, " values on the stack"));
    }
    stack_.push_back(index);
    return true;
  }

  bool pop(uint32_t& index, const char* what) {
    size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) return fail(cat(what, " on an empty stack"));
    index = stack_.back();
    stack_.pop_back();
    return true;
  }

  // The values above the last MARK, which goes.
  bool pop_mark(size_t& first, const char* what) {
    if (marks_.empty()) return fail(cat(what, " without a MARK"));
    first = marks_.back();
    marks_.pop_back();
    return true;
  }

  bool add_items(uint32_t container, size_t count) {
    if (count > limits_.max_values - items_) {
      return fail(cat("more than ", limits_.max_values, " items in lists and dicts"));
    }
    items_ += count;
    nodes_[container].items.reserve(nodes_[container].items.size() + count);
    return true;
  }

  // Moves stack_[first..] into `container` (a list, or a dict as key, value pairs).
  bool fill(uint32_t container, size_t first, Kind want, const char* what) {
    Node& target = nodes_[container];
    if (target.kind != want) {
      return fail(cat(what, " on a ", kind_name(target.kind),
                      want == Kind::kDict ? ", not a dict" : ", not a list"));
    }
    size_t count = stack_.size() - first;
    if (want == Kind::kDict) {
      if (count % 2 != 0) return fail(cat(what, " with a key and no value"));
      for (size_t i = first; i < stack_.size(); i += 2) {
        Kind key = nodes_[stack_[i]].kind;
        if (key != Kind::kInt && key != Kind::kString) {
          return fail(cat(what, ": a dict key of type ", kind_name(key), " (only int and str)"));
        }
      }
    }
    if (!add_items(container, count)) return false;
    std::vector<uint32_t>& items = nodes_[container].items;
    items.insert(items.end(), stack_.begin() + static_cast<ptrdiff_t>(first), stack_.end());
    stack_.resize(first);
    return true;
  }

  bool make_sequence(Kind kind, size_t first) {
    size_t count = stack_.size() - first;
    std::vector<uint32_t> items(stack_.begin() + static_cast<ptrdiff_t>(first), stack_.end());
    stack_.resize(first);
    if (count > limits_.max_values - items_) {
      return fail(cat("more than ", limits_.max_values, " items in lists and dicts"));
    }
    items_ += count;
    Node node;
    node.kind = kind;
    node.items = std::move(items);
    if (kind == Kind::kDict) {
      if (count % 2 != 0) return fail("DICT with a key and no value");
      for (size_t i = 0; i < node.items.size(); i += 2) {
        Kind key = nodes_[node.items[i]].kind;
        if (key != Kind::kInt && key != Kind::kString) {
          return fail(cat("DICT: a dict key of type ", kind_name(key), " (only int and str)"));
        }
      }
    }
    return new_node(std::move(node));
  }

  bool string_node(size_t length, const char* what) {
    if (!need(length, what)) return false;
    Node node;
    node.kind = Kind::kString;
    node.text = in_.substr(pos_, length);
    pos_ += length;
    return new_node(std::move(node));
  }

  bool int_node(int64_t value) {
    Node node;
    node.kind = Kind::kInt;
    node.integer = value;
    return new_node(std::move(node));
  }

  bool put(uint64_t index) {
    if (stack_.empty()) return fail("memo put on an empty stack");
    auto found = memo_.find(index);
    if (found != memo_.end()) {
      found->second = stack_.back();
      return true;
    }
    if (memo_.size() >= limits_.max_memo_entries) {
      return fail(cat("more than ", limits_.max_memo_entries, " memo entries"));
    }
    memo_.emplace(index, stack_.back());
    return true;
  }

  bool get(uint64_t index) {
    auto found = memo_.find(index);
    if (found == memo_.end())
      return fail(cat("memo get of index ", index, ", which was never put"));
    return push(found->second);
  }

  static const char* kind_name(Kind kind) {
    switch (kind) {
      case Kind::kNone:
        return "None";
      case Kind::kBool:
        return "bool";
      case Kind::kInt:
        return "int";
      case Kind::kFloat:
        return "float";
      case Kind::kString:
        return "str";
      case Kind::kList:
        return "list";
      case Kind::kTuple:
        return "tuple";
      case Kind::kDict:
        return "dict";
    }
    return "?";
  }

  std::optional<uint32_t> parse() {
    if (in_.size() > limits_.max_input_bytes) {
      fail(cat(in_.size(), " bytes, more than the limit of ", limits_.max_input_bytes));
      return std::nullopt;
    }
    while (pos_ < in_.size()) {
      op_at_ = pos_;
      uint8_t op = static_cast<uint8_t>(in_[pos_++]);
      if (op == kStop) {
        if (!marks_.empty()) {
          fail("STOP with a MARK still open");
          return std::nullopt;
        }
        if (stack_.size() != 1) {
          fail(cat("STOP with ", stack_.size(), " values on the stack, not 1"));
          return std::nullopt;
        }
        return stack_.back();
      }
      if (!step(op)) return std::nullopt;
    }
    op_at_ = pos_;
    fail("the input ends before a STOP opcode (truncated)");
    return std::nullopt;
  }

  bool step(uint8_t op) {
    switch (op) {
      case kProto: {
        if (!need(1, "PROTO")) return false;
        uint64_t version = read_le(1);
        if (version > 5) return fail(cat("pickle protocol ", version, " is unknown"));
        return true;
      }
      case kFrame: {
        if (!need(8, "FRAME")) return false;
        uint64_t length = read_le(8);
        if (length > in_.size() - pos_) {
          return fail(cat("FRAME of ", length, " bytes, ", in_.size() - pos_, " left (truncated)"));
        }
        return true;
      }
      case kMark:
        if (marks_.size() >= static_cast<size_t>(limits_.max_depth)) {
          return fail(cat("MARKs nested deeper than ", limits_.max_depth));
        }
        marks_.push_back(stack_.size());
        return true;
      case kPop: {
        if (!marks_.empty() && marks_.back() == stack_.size()) {
          marks_.pop_back();  // as Python: POP of a MARK at the top drops the MARK
          return true;
        }
        uint32_t ignored = 0;
        return pop(ignored, "POP");
      }
      case kPopMark: {
        size_t first = 0;
        if (!pop_mark(first, "POP_MARK")) return false;
        stack_.resize(first);
        return true;
      }
      case kDup: {
        size_t floor = marks_.empty() ? 0 : marks_.back();
        if (stack_.size() <= floor) return fail("DUP on an empty stack");
        return push(stack_.back());
      }
      case kNone:
        return new_node(Node{});
      case kNewTrue:
      case kNewFalse: {
        Node node;
        node.kind = Kind::kBool;
        node.boolean = op == kNewTrue;
        return new_node(std::move(node));
      }
      case kBinInt:
        if (!need(4, "BININT")) return false;
        return int_node(static_cast<int32_t>(static_cast<uint32_t>(read_le(4))));
      case kBinInt1:
        if (!need(1, "BININT1")) return false;
        return int_node(static_cast<int64_t>(read_le(1)));
      case kBinInt2:
        if (!need(2, "BININT2")) return false;
        return int_node(static_cast<int64_t>(read_le(2)));
      case kLong1:
      case kLong4: {
        size_t prefix = op == kLong1 ? 1 : 4;
        const char* name = op == kLong1 ? "LONG1" : "LONG4";
        if (!need(prefix, name)) return false;
        uint64_t length = read_le(prefix);
        if (op == kLong4 && static_cast<int32_t>(static_cast<uint32_t>(length)) < 0) {
          return fail("LONG4 with a negative length");
        }
        if (length > 8) return fail(cat(name, " of ", length, " bytes: wider than 64 bits"));
        if (!need(length, name)) return false;
        uint64_t raw = read_le(length);
        if (length > 0 && length < 8 && (raw >> (8 * length - 1)) != 0) {
          raw |= ~uint64_t{0} << (8 * length);  // sign-extend
        }
        return int_node(static_cast<int64_t>(raw));
      }
      case kBinFloat: {
        if (!need(8, "BINFLOAT")) return false;
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(in_[pos_ + i]);
        pos_ += 8;  // big-endian
        Node node;
        node.kind = Kind::kFloat;
        node.real = std::bit_cast<double>(bits);
        return new_node(std::move(node));
      }
      case kShortBinString:
      case kShortBinUnicode: {
        const char* name = op == kShortBinString ? "SHORT_BINSTRING" : "SHORT_BINUNICODE";
        if (!need(1, name)) return false;
        return string_node(read_le(1), name);
      }
      case kBinString:
      case kBinUnicode: {
        const char* name = op == kBinString ? "BINSTRING" : "BINUNICODE";
        if (!need(4, name)) return false;
        uint64_t length = read_le(4);
        if (op == kBinString && static_cast<int32_t>(static_cast<uint32_t>(length)) < 0) {
          return fail("BINSTRING with a negative length");
        }
        return string_node(length, name);
      }
      case kBinUnicode8: {
        if (!need(8, "BINUNICODE8")) return false;
        return string_node(read_le(8), "BINUNICODE8");
      }
      case kEmptyList:
      case kEmptyDict:
      case kEmptyTuple: {
        Node node;
        node.kind = op == kEmptyList ? Kind::kList : op == kEmptyDict ? Kind::kDict : Kind::kTuple;
        return new_node(std::move(node));
      }
      case kList:
      case kTuple:
      case kDict: {
        const char* name = op == kList ? "LIST" : op == kTuple ? "TUPLE" : "DICT";
        size_t first = 0;
        if (!pop_mark(first, name)) return false;
        return make_sequence(op == kList    ? Kind::kList
                             : op == kTuple ? Kind::kTuple
                                            : Kind::kDict,
                             first);
      }
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        size_t count = op - kTuple1 + 1;
        size_t floor = marks_.empty() ? 0 : marks_.back();
        if (stack_.size() - floor < count) {
          return fail(cat("TUPLE", count, " with ", stack_.size() - floor, " values on the stack"));
        }
        return make_sequence(Kind::kTuple, stack_.size() - count);
      }
      case kAppend: {
        uint32_t value = 0;
        if (!pop(value, "APPEND")) return false;
        size_t floor = marks_.empty() ? 0 : marks_.back();
        if (stack_.size() <= floor) return fail("APPEND without a list");
        stack_.push_back(value);
        return fill(stack_[stack_.size() - 2], stack_.size() - 1, Kind::kList, "APPEND");
      }
      case kSetItem: {
        size_t floor = marks_.empty() ? 0 : marks_.back();
        if (stack_.size() - floor < 3) return fail("SETITEM without a dict, key and value");
        return fill(stack_[stack_.size() - 3], stack_.size() - 2, Kind::kDict, "SETITEM");
      }
      case kAppends:
      case kSetItems: {
        const char* name = op == kAppends ? "APPENDS" : "SETITEMS";
        size_t first = 0;
        if (!pop_mark(first, name)) return false;
        size_t floor = marks_.empty() ? 0 : marks_.back();
        if (first <= floor || first > stack_.size()) {
          return fail(cat(name, " without a ", op == kAppends ? "list" : "dict"));
        }
        return fill(stack_[first - 1], first, op == kAppends ? Kind::kList : Kind::kDict, name);
      }
      case kBinPut:
        if (!need(1, "BINPUT")) return false;
        return put(read_le(1));
      case kLongBinPut:
        if (!need(4, "LONG_BINPUT")) return false;
        return put(read_le(4));
      case kMemoize:
        return put(memo_.size());
      case kBinGet:
        if (!need(1, "BINGET")) return false;
        return get(read_le(1));
      case kLongBinGet:
        if (!need(4, "LONG_BINGET")) return false;
        return get(read_le(4));
      default:
        break;
    }
    if (const char* name = object_opcode_name(op)) {
      return fail(cat(name, " (opcode 0x", hex(op), "): building objects is not allowed"));
    }
    return fail(cat("unsupported opcode 0x", hex(op)));
  }

  static std::string hex(uint8_t op) {
    const char* digits = "0123456789abcdef";
    return {digits[op >> 4], digits[op & 15]};
  }

  // Node `index` as a PickleValue at nesting `depth`; a memoized value is copied where it is used.
  bool convert(uint32_t index, int depth, PickleValue& out) {
    if (++values_out_ > limits_.max_values) {
      op_at_ = in_.size();
      return fail(
          cat("more than ", limits_.max_values, " values (memoized ones counted each time)"));
    }
    const Node& node = nodes_[index];
    switch (node.kind) {
      case Kind::kNone:
        out.storage().emplace<std::monostate>();
        return true;
      case Kind::kBool:
        out.storage().emplace<bool>(node.boolean);
        return true;
      case Kind::kInt:
        out.storage().emplace<int64_t>(node.integer);
        return true;
      case Kind::kFloat:
        out.storage().emplace<double>(node.real);
        return true;
      case Kind::kString:
        if (node.text.size() > limits_.max_string_bytes - string_bytes_out_) {
          op_at_ = in_.size();
          return fail(cat("more than ", limits_.max_string_bytes, " bytes of strings"));
        }
        string_bytes_out_ += node.text.size();
        out.storage().emplace<std::string>(node.text);
        return true;
      case Kind::kList:
      case Kind::kTuple:
      case Kind::kDict:
        break;
    }
    if (depth > limits_.max_depth) {
      op_at_ = in_.size();
      return fail(cat("lists and dicts nested deeper than ", limits_.max_depth));
    }
    if (node.items.size() > limits_.max_values - values_out_) {
      op_at_ = in_.size();
      return fail(
          cat("more than ", limits_.max_values, " values (memoized ones counted each time)"));
    }
    if (node.kind != Kind::kDict) {
      PickleList& list = out.storage().emplace<PickleList>();
      list.reserve(node.items.size());
      for (uint32_t item : node.items) {
        list.emplace_back();
        if (!convert(item, depth + 1, list.back())) return false;
      }
      return true;
    }
    PickleDict& dict = out.storage().emplace<PickleDict>();
    dict.reserve(node.items.size() / 2);
    for (size_t i = 0; i + 1 < node.items.size(); i += 2) {
      const Node& key = nodes_[node.items[i]];
      PickleKey converted;
      if (key.kind == Kind::kInt) {
        converted = key.integer;
      } else {
        if (key.text.size() > limits_.max_string_bytes - string_bytes_out_) {
          op_at_ = in_.size();
          return fail(cat("more than ", limits_.max_string_bytes, " bytes of strings"));
        }
        string_bytes_out_ += key.text.size();
        converted = std::string(key.text);
      }
      dict.emplace_back(std::piecewise_construct, std::forward_as_tuple(std::move(converted)),
                        std::forward_as_tuple());
      if (!convert(node.items[i + 1], depth + 1, dict.back().second)) return false;
    }
    return true;
  }

  std::string_view in_;
  PickleLimits limits_;
  size_t pos_ = 0;
  size_t op_at_ = 0;  // where the opcode being read starts, for errors
  std::string error_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  std::unordered_map<uint64_t, uint32_t> memo_;
  size_t items_ = 0;  // items in every container together
  size_t values_out_ = 0;
  size_t string_bytes_out_ = 0;
};

}  // namespace

PickleResult PickleReader::read(std::string_view bytes) const {
  return Parser(bytes, limits_).run();
}

}  // namespace cohort::observe
