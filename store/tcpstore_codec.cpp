#include "store/tcpstore_codec.hpp"

#include <algorithm>
#include <span>

#include "common/text.hpp"
#include "store/tcpstore_limits.hpp"

namespace cohort {
namespace {

// The fields of one request, in wire order. kKeys and kPairs repeat kCount times.
enum Field : uint8_t { kEnd, kKey, kValue, kInt64, kUint32, kCount, kKeys, kPairs };

constexpr uint8_t kNoFields[] = {kEnd};
constexpr uint8_t kKeyOnly[] = {kKey, kEnd};
constexpr uint8_t kKeyValue[] = {kKey, kValue, kEnd};
constexpr uint8_t kKeyTwoValues[] = {kKey, kValue, kValue, kEnd};
constexpr uint8_t kKeyInt64[] = {kKey, kInt64, kEnd};
constexpr uint8_t kUint32Only[] = {kUint32, kEnd};
constexpr uint8_t kKeyList[] = {kCount, kKeys, kEnd};
constexpr uint8_t kPairList[] = {kCount, kPairs, kEnd};

const uint8_t* fields_of(StoreOp op) {
  switch (op) {
    case StoreOp::Validate:
    case StoreOp::Ping:
      return kUint32Only;
    case StoreOp::Set:
    case StoreOp::Append:
    case StoreOp::QueuePush:
      return kKeyValue;
    case StoreOp::CompareSet:
      return kKeyTwoValues;
    case StoreOp::Get:
    case StoreOp::WatchKey:
    case StoreOp::DeleteKey:
    case StoreOp::QueuePop:
    case StoreOp::QueueLen:
      return kKeyOnly;
    case StoreOp::Add:
    case StoreOp::Barrier:
      return kKeyInt64;
    case StoreOp::Check:
    case StoreOp::Wait:
    case StoreOp::MultiGet:
      return kKeyList;
    case StoreOp::MultiSet:
      return kPairList;
    case StoreOp::GetNumKeys:
    case StoreOp::CancelWait:
    case StoreOp::ListKeys:
      return kNoFields;
  }
  return kNoFields;
}

using S = StoreOp;
// §2. The 1.13 table also takes 9/10/11, which only a 2.1-numbering client can send (they are
// free in 1.13), so such a client works in the default legacy mode except for opcodes 7 and 8.
constexpr StoreOp kLegacy113Ops[] = {S::Set,       S::CompareSet, S::Get,        S::Add,
                                     S::Check,     S::Wait,       S::GetNumKeys, S::WatchKey,
                                     S::DeleteKey, S::MultiGet,   S::MultiSet,   S::CancelWait};
constexpr StoreOp kLegacy21Ops[] = {S::Set,    S::CompareSet, S::Get,        S::Add,
                                    S::Check,  S::Wait,       S::GetNumKeys, S::DeleteKey,
                                    S::Append, S::MultiGet,   S::MultiSet,   S::CancelWait};
constexpr StoreOp kValidatedOps[] = {
    S::Validate,   S::Set,       S::CompareSet, S::Get,      S::Add,      S::Check,      S::Wait,
    S::GetNumKeys, S::DeleteKey, S::Append,     S::MultiGet, S::MultiSet, S::CancelWait, S::Ping,
    S::QueuePush,  S::QueuePop,  S::QueueLen,   S::ListKeys, S::Barrier};

std::span<const StoreOp> table_of(StoreNumbering numbering) {
  switch (numbering) {
    case StoreNumbering::Legacy113:
      return kLegacy113Ops;
    case StoreNumbering::Legacy21:
      return kLegacy21Ops;
    case StoreNumbering::Validated:
      return kValidatedOps;
  }
  return {};
}

uint64_t load_le(const uint8_t* data, size_t width) {
  uint64_t value = 0;
  for (size_t i = width; i > 0; --i) value = (value << 8) | data[i - 1];
  return value;
}

// Strings of finished requests, kept for the next fields this thread decodes: at most a few,
// none larger than a short value, so what the pool holds stays small however many connections
// the thread serves.
constexpr size_t kSpareStrings = 16;
constexpr size_t kSpareStringBytes = 1024;
/// A list that grew past this many items (a MULTI_GET of many keys) is freed, not kept.
constexpr size_t kKeptListItems = 8;

std::vector<std::string>& spare_strings() {
  thread_local std::vector<std::string> spare = [] {
    std::vector<std::string> strings;
    strings.reserve(kSpareStrings);
    return strings;
  }();
  return spare;
}

std::string spare_string() {
  auto& spare = spare_strings();
  if (spare.empty()) return {};
  std::string string = std::move(spare.back());
  spare.pop_back();
  return string;
}

// Empties `list`, keeping its capacity where it is small, and gives its strings to the pool.
void recycle(std::vector<std::string>& list) {
  auto& spare = spare_strings();
  for (auto& string : list) {
    if (spare.size() >= kSpareStrings) break;
    if (string.capacity() > kSpareStringBytes) continue;
    string.clear();
    spare.push_back(std::move(string));
  }
  list.clear();
  if (list.capacity() > kKeptListItems) std::vector<std::string>().swap(list);
}

void append_le(std::string& out, uint64_t value, size_t width) {
  for (size_t i = 0; i < width; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

}  // namespace

std::string_view op_name(StoreOp op) {
  static constexpr std::string_view kNames[] = {
      "VALIDATE",   "SET",       "COMPARE_SET", "GET",         "ADD",
      "CHECK",      "WAIT",      "GETNUMKEYS",  "WATCH_KEY",   "DELETE_KEY",
      "APPEND",     "MULTI_GET", "MULTI_SET",   "CANCEL_WAIT", "PING",
      "QUEUE_PUSH", "QUEUE_POP", "QUEUE_LEN",   "LIST_KEYS",   "BARRIER"};
  auto index = static_cast<size_t>(op);
  return index < std::size(kNames) ? kNames[index] : "UNKNOWN";
}

TcpStoreDecoder::TcpStoreDecoder(StoreNumbering legacy)
    : legacy_(legacy == StoreNumbering::Validated ? StoreNumbering::Legacy113 : legacy) {}

DecodeStep TcpStoreDecoder::feed(std::string_view bytes) {
  if (phase_ == Phase::Failed) return {DecodeStatus::Error, 0};
  if (phase_ == Phase::Done) reset();  // the previous request was not taken: drop it
  size_t pos = 0;
  if (phase_ == Phase::Opcode) {
    if (bytes.empty()) return {DecodeStatus::NeedMore, 0};
    auto opcode = static_cast<uint8_t>(bytes[pos++]);
    if (!numbering_ && opcode == 0) {
      phase_ = Phase::Detect;  // §2.1: VALIDATE or a 1.13 SET; the next 4 bytes decide
    } else {
      if (!numbering_) numbering_ = legacy_;
      if (!start_op(opcode)) return {DecodeStatus::Error, pos};
    }
  }
  if (phase_ == Phase::Detect) {
    if (!read_fixed(bytes, pos, 4)) return {DecodeStatus::NeedMore, pos};
    if (load_le(fixed_.data(), 4) == kStoreValidateMagic) {
      numbering_ = StoreNumbering::Validated;
      request_.op = StoreOp::Validate;
      request_.number = kStoreValidateMagic;
      phase_ = Phase::Done;
      return {DecodeStatus::Request, pos};
    }
    // A legacy SET: the 4 bytes read are the low half of its key length, kept in fixed_.
    numbering_ = legacy_;
    fixed_have_ = 4;
    request_.op = StoreOp::Set;
    program_ = fields_of(StoreOp::Set);
    field_ = 0;
    phase_ = Phase::Fields;
  }
  pos += step_fields(bytes.substr(pos));
  switch (phase_) {
    case Phase::Done:
      return {DecodeStatus::Request, pos};
    case Phase::Failed:
      return {DecodeStatus::Error, pos};
    default:
      return {DecodeStatus::NeedMore, pos};
  }
}

StoreRequest TcpStoreDecoder::take_request() {
  StoreRequest request = std::move(request_);
  reset();
  return request;
}

bool TcpStoreDecoder::start_op(uint8_t opcode) {
  auto table = table_of(*numbering_);
  if (opcode >= table.size()) {
    fail(cat("unknown opcode ", int(opcode)));
    return false;
  }
  request_.op = table[opcode];
  program_ = fields_of(request_.op);
  field_ = 0;
  phase_ = Phase::Fields;
  return true;
}

// Runs the field program over `bytes`; returns how many were consumed. Leaves phase_ at Done,
// Failed, or Fields (input exhausted).
size_t TcpStoreDecoder::step_fields(std::string_view bytes) {
  size_t pos = 0;
  while (phase_ == Phase::Fields) {
    switch (program_[field_]) {
      case kEnd:
        phase_ = Phase::Done;
        break;
      case kKey:
        if (!read_field_bytes(bytes, pos, request_.keys, kStoreMaxKeyBytes)) {
          return pos;
        }
        ++field_;
        break;
      case kValue:
        if (!read_field_bytes(bytes, pos, request_.values, kStoreMaxValueBytes)) {
          return pos;
        }
        ++field_;
        break;
      case kInt64:
        if (!read_fixed(bytes, pos, 8)) return pos;
        request_.number = static_cast<int64_t>(load_le(fixed_.data(), 8));
        ++field_;
        break;
      case kUint32:
        if (!read_fixed(bytes, pos, 4)) return pos;
        request_.number = static_cast<int64_t>(load_le(fixed_.data(), 4));
        if (request_.op == StoreOp::Validate && request_.number != kStoreValidateMagic) {
          fail(cat("wrong validate magic ", request_.number));
          return pos;
        }
        ++field_;
        break;
      case kCount:
        if (!read_fixed(bytes, pos, 8)) return pos;
        items_left_ = load_le(fixed_.data(), 8);
        if (items_left_ > kStoreMaxKeysPerRequest) {
          fail(cat(op_name(request_.op), " with ", items_left_, " keys exceeds the limit of ",
                   kStoreMaxKeysPerRequest));
          return pos;
        }
        ++field_;
        break;
      case kKeys:
        if (items_left_ == 0) {
          ++field_;
          break;
        }
        if (!read_field_bytes(bytes, pos, request_.keys, kStoreMaxKeyBytes)) {
          return pos;
        }
        --items_left_;
        break;
      case kPairs:
        if (items_left_ == 0) {
          ++field_;
          break;
        }
        if (!pair_value_next_) {
          if (!read_field_bytes(bytes, pos, request_.keys, kStoreMaxKeyBytes)) {
            return pos;
          }
          pair_value_next_ = true;
        } else {
          if (!read_field_bytes(bytes, pos, request_.values, kStoreMaxValueBytes)) {
            return pos;
          }
          pair_value_next_ = false;
          --items_left_;
        }
        break;
    }
  }
  return pos;
}

// Collects a fixed-width little-endian integer across calls into fixed_; true once all `width`
// bytes are in (the caller reads fixed_ right away; the next read_fixed starts afresh).
bool TcpStoreDecoder::read_fixed(std::string_view bytes, size_t& pos, size_t width) {
  size_t take = std::min(width - fixed_have_, bytes.size() - pos);
  std::copy_n(bytes.data() + pos, take, fixed_.data() + fixed_have_);
  fixed_have_ += static_cast<uint8_t>(take);
  pos += take;
  if (fixed_have_ < width) return false;
  fixed_have_ = 0;
  return true;
}

// Reads one `bytes` field (u64 length + body) as a new last element of `list`, across calls.
// False when the input ran out or the stream failed (phase_ says which). The length is checked
// against `limit` before the element exists, and the body grows only with bytes that arrived.
bool TcpStoreDecoder::read_field_bytes(std::string_view bytes, size_t& pos,
                                       std::vector<std::string>& list, uint64_t limit) {
  if (!in_body_) {
    if (!read_fixed(bytes, pos, 8)) return false;
    uint64_t length = load_le(fixed_.data(), 8);
    if (length > limit) {
      fail(cat(op_name(request_.op), " field of ", length, " bytes exceeds the limit of ", limit));
      return false;
    }
    request_bytes_ += length;
    if (request_bytes_ > kStoreMaxRequestBytes) {
      fail(cat(op_name(request_.op), " of more than ", kStoreMaxRequestBytes, " bytes"));
      return false;
    }
    declared_bytes_ += length + kStoreFieldOverheadBytes;
    if (check_declared_) {
      if (std::string refused = check_declared_(declared_bytes_); !refused.empty()) {
        fail(cat(op_name(request_.op), ": ", refused));
        return false;
      }
    }
    list.push_back(spare_string());
    body_left_ = length;
    in_body_ = true;
  }
  size_t take = static_cast<size_t>(std::min<uint64_t>(body_left_, bytes.size() - pos));
  list.back().append(bytes.data() + pos, take);
  pos += take;
  body_left_ -= take;
  if (body_left_ > 0) return false;
  in_body_ = false;
  return true;
}

void TcpStoreDecoder::fail(std::string message) {
  error_ = std::move(message);
  phase_ = Phase::Failed;
  request_ = StoreRequest{};  // release whatever the broken request had buffered
}

void TcpStoreDecoder::reset() {
  phase_ = Phase::Opcode;
  program_ = nullptr;
  field_ = 0;
  in_body_ = false;
  pair_value_next_ = false;
  fixed_have_ = 0;
  body_left_ = 0;
  items_left_ = 0;
  request_bytes_ = 0;
  declared_bytes_ = 0;
  recycle(request_.keys);
  recycle(request_.values);
  request_.op = StoreOp::GetNumKeys;
  request_.number = 0;
}

void append_u8(std::string& out, uint8_t value) { out.push_back(static_cast<char>(value)); }

void append_u32(std::string& out, uint32_t value) { append_le(out, value, 4); }

void append_i64(std::string& out, int64_t value) {
  append_le(out, static_cast<uint64_t>(value), 8);
}

void append_bytes(std::string& out, std::string_view value) {
  append_le(out, value.size(), 8);
  out.append(value);
}

namespace {
constexpr uint8_t kHighestLegacyOpcode = 16;
}  // namespace

bool starts_like_tcpstore_request(std::string_view first_bytes) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(first_bytes.data());
  if (first_bytes.size() >= 5 && bytes[0] == 0 && load_le(bytes + 1, 4) == kStoreValidateMagic)
    return true;
  return first_bytes.size() >= 9 && bytes[0] <= kHighestLegacyOpcode &&
         load_le(bytes + 1, 8) < 64 * 1024;
}

bool may_start_tcpstore_request(std::string_view first_bytes) {
  return first_bytes.empty() ||
         (first_bytes.size() < 9 && static_cast<uint8_t>(first_bytes[0]) <= kHighestLegacyOpcode);
}

bool append_request(std::string& out, const StoreRequest& request, StoreNumbering numbering) {
  auto table = table_of(numbering);
  auto found = std::find(table.begin(), table.end(), request.op);
  if (found == table.end()) return false;
  append_u8(out, static_cast<uint8_t>(found - table.begin()));
  const auto& keys = request.keys;
  const auto& values = request.values;
  auto key = [&](size_t i) { return i < keys.size() ? std::string_view(keys[i]) : ""; };
  auto value = [&](size_t i) { return i < values.size() ? std::string_view(values[i]) : ""; };
  for (const uint8_t* field = fields_of(request.op); *field != kEnd; ++field) {
    switch (*field) {
      case kKey:
        append_bytes(out, key(0));
        break;
      case kValue:  // the first kValue is values[0], a second one (COMPARE_SET) values[1]
        append_bytes(out, value(field[-1] == kValue ? 1 : 0));
        break;
      case kInt64:
        append_i64(out, request.number);
        break;
      case kUint32:
        append_u32(out, static_cast<uint32_t>(request.number));
        break;
      case kCount:
        append_le(out, keys.size(), 8);
        break;
      case kKeys:
        for (const auto& each : keys) append_bytes(out, each);
        break;
      case kPairs:
        for (size_t i = 0; i < keys.size(); ++i) {
          append_bytes(out, keys[i]);
          append_bytes(out, value(i));
        }
        break;
    }
  }
  return true;
}

}  // namespace cohort
