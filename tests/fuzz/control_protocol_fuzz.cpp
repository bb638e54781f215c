// libFuzzer target: arbitrary bytes go through the control protocol twice, as a daemon or an
// agent reads them. As bytes: cut into chunks, through the frame decoder and message decoder. As
// a grammar (JsonGrammar): the bytes choose messages of the protocol with one member mutated,
// whose values may nest arrays 16,000 deep, repeat an element 30,000 times, or be long strings
// and odd numbers: shapes that byte mutations of a 4 KB input never reach. Checks that nothing
// crashes, overflows the stack, leaks, overflows (UBSan) or allocates from a frame's length
// prefix, and that every message that decodes encodes to a frame that decodes to the same
// encoding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/text.hpp"
#include "proto/control_frame.hpp"
#include "proto/control_messages.hpp"

namespace {

using namespace cohort::proto;

void require(bool condition) {
  if (!condition) std::abort();
}

void check_message(const std::string& payload) {
  std::string error;
  std::optional<ControlMessage> message = decode_message(payload, error);
  if (!message) {
    require(!error.empty());
    return;
  }
  std::string encoded = encode_message(*message);
  FrameDecoder decoder;
  std::string frame = encode_frame(encoded);
  decoder.feed(frame.data(), frame.size());
  std::string again;
  require(decoder.next(again) == FrameDecoder::Status::Frame);
  std::optional<ControlMessage> decoded = decode_message(again, error);
  require(decoded.has_value());
  require(decoded->index() == message->index());
  require(encode_message(*decoded) == encoded);
}

// The raw path: the first byte picks the chunk size (1..256), so one input explores many splits.
void check_stream(const uint8_t* data, size_t size) {
  size_t chunk = static_cast<size_t>(data[0]) + 1;
  FrameDecoder decoder;
  bool closed = false;  // by a frame error, as the connection would be
  for (size_t pos = 1; pos < size && !closed; pos += chunk) {
    size_t length = std::min(chunk, size - pos);
    decoder.feed(reinterpret_cast<const char*>(data + pos), length);
    std::string payload;
    while (!closed) {
      FrameDecoder::Status status = decoder.next(payload);
      if (status == FrameDecoder::Status::NeedMore) break;
      closed = status == FrameDecoder::Status::Error;
      if (!closed) check_message(payload);
    }
  }
}

// A generated payload (below the frame limit), framed, comes out of the decoder whole.
void check_framed(const std::string& payload) {
  std::string frame = encode_frame(payload);
  FrameDecoder decoder;
  decoder.feed(frame.data(), frame.size());
  std::string out;
  require(decoder.next(out) == FrameDecoder::Status::Frame && out == payload);
}

using Members = std::vector<std::pair<std::string, std::string>>;  // key, value as JSON text

// Every message of the protocol with its default values, as members in JSON text: what the
// grammar mutates. Derived from encode_message, so a new message or field is fuzzed unasked.
template <size_t... I>
std::vector<Members> message_templates(std::index_sequence<I...>) {
  std::vector<Members> templates;
  for (const ControlMessage& message : {ControlMessage(std::in_place_index<I>)...}) {
    Members members;
    nlohmann::json parsed = nlohmann::json::parse(encode_message(message));
    for (const auto& [key, value] : parsed.items()) {
      members.emplace_back(key, value.dump());
    }
    templates.push_back(std::move(members));
  }
  return templates;
}

const std::vector<Members>& templates() {
  static const std::vector<Members> all =
      message_templates(std::make_index_sequence<std::variant_size_v<ControlMessage>>());
  return all;
}

// Reads fuzz bytes as choices that write JSON texts: each a valid message with one member replaced,
// dropped, duplicated, renamed or added, the new values built by the grammar below. A byte is
// read per choice and 0 once the input is spent; values nest at most kMaxDepth grammar levels
// and the text stops growing at kBudget bytes, so every input makes a finite document.
class JsonGrammar {
 public:
  explicit JsonGrammar(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool more() const { return pos_ < size_; }
  // The next message; reads at least one byte.
  std::string message() {
    const Members& members = templates()[pick(templates().size())];
    size_t target = pick(members.size() + 1);  // members.size(): add a member
    size_t mutation = pick(4);
    out_ = "{";
    for (size_t i = 0; i < members.size(); ++i) {
      const auto& [key, original] = members[i];
      if (i != target) {
        member(key, original);
      } else if (mutation == 0) {  // replaced
        key_text(key);
        value(0);
      } else if (mutation == 2) {  // duplicated: the same key twice, the second one new
        member(key, original);
        key_text(key);
        value(0);
      } else if (mutation == 3) {  // renamed
        any_key();
        out_ += original;
      }  // mutation 1: dropped
    }
    if (target == members.size()) {
      any_key();
      value(0);
    }
    out_ += '}';
    if (out_.size() > kBudget) out_.resize(kBudget);
    return std::move(out_);
  }

 private:
  // Half of it holds 16,384 levels of arrays or 5,461 of objects.
  static constexpr size_t kBudget = kMaxFrameBytes / 16;
  static constexpr int kMaxDepth = 6;

  uint8_t next() { return pos_ < size_ ? data_[pos_++] : 0; }
  size_t pick(size_t choices) { return next() % choices; }
  // A count from one byte: below 0x80 its low 4 bits, so that the JSON text of a seed makes
  // small documents; from 0x80 up a power of two from 16 to 65,536 (from 0xe0).
  size_t amount() {
    uint8_t byte = next();
    if (byte < 0x80) return byte & 15;
    return size_t{1} << std::min(16, 4 + (byte - 0x80) / 8);
  }
  size_t room() const { return out_.size() < kBudget ? kBudget - out_.size() : 0; }
  bool full() const { return room() == 0; }

  void member(const std::string& key, const std::string& value) {
    key_text(key);
    out_ += value;
  }
  void key_text(const std::string& key) {
    if (out_.back() != '{') out_ += ',';
    out_ += '"' + key + "\":";
  }
  // A key of another message (so "type" too), or an odd string.
  void any_key() {
    if (out_.back() != '{') out_ += ',';
    if (next() & 1) {
      const Members& members = templates()[pick(templates().size())];
      out_ += '"' + members[pick(members.size())].first + '"';
    } else {
      text();
    }
    out_ += ':';
  }

  static constexpr const char* kLiterals[] = {"true", "false", "null", "tru", "[", "}", "", "\"\\"};

  void value(int depth) {
    if (depth >= kMaxDepth || full()) {
      out_ += '0';
      return;
    }
    switch (pick(8)) {
      case 0:
        nested("[", "]", depth);
        break;
      case 1:
        nested("{\"a\":", "}", depth);
        break;
      case 2:
        wide_array(depth);
        break;
      case 3:
        text();
        break;
      case 4:
        number();
        break;
      case 5:
        object(depth);
        break;
      case 6:
        out_ += kLiterals[pick(std::size(kLiterals))];
        break;
      default: {  // raw bytes, up to 63
        size_t length = std::min<size_t>(pick(64), size_ - pos_);
        out_.append(reinterpret_cast<const char*>(data_ + pos_), length);
        pos_ += length;
      }
    }
  }

  // `amount` levels of open ... value ... close, written in loops: one level of the grammar.
  void nested(std::string_view open, std::string_view close, int depth) {
    size_t levels = std::min(amount(), room() / 2 / (open.size() + close.size()));
    for (size_t i = 0; i < levels; ++i) out_ += open;
    value(depth + 1);
    for (size_t i = 0; i < levels; ++i) out_ += close;
  }

  // One element, repeated `amount` times.
  void wide_array(int depth) {
    out_ += '[';
    size_t start = out_.size();
    value(depth + 1);
    std::string element = out_.substr(start);
    for (size_t count = amount(); count > 0 && !full(); --count) out_ += ',' + element;
    out_ += ']';
  }

  // A piece, repeated `amount` times: escapes, surrogates, control and invalid UTF-8 bytes.
  void text() {
    static constexpr std::string_view kPieces[] = {
        "a",       "\\\"",  "\\\\",     "\\u0000",      "\\ud800", "\\udc00\\ud800",
        "\x1b[2J", "\r",    "\xc3\xa9", "\xe2\x82\xac", "\xff",    "\xc3",
        "\\x",     "\\u12", "\x7f\x9b", "\n\t"};
    std::string_view piece = kPieces[pick(std::size(kPieces))];
    out_ += '"';
    for (size_t count = amount(); count > 0 && !full(); --count) out_ += piece;
    out_ += '"';
  }

  // Malformed numbers, doubles, the edges of int, int64_t and uint64_t, a port, kMaxNodes and a
  // year of milliseconds, or a run of `amount` digits.
  void number() {
    static const std::vector<std::string> kNumbers = cohort::split(
        "0 -0 1 -1 01 1.0 0.5 .5 1E+2 1e - 0x10 NaN Infinity 1e300 -1e300 1e-400 "
        "2147483647 2147483648 -2147483648 -2147483649 4294967297 9223372036854775807 "
        "9223372036854775808 -9223372036854775808 -9223372036854775809 18446744073709551615 "
        "18446744073709551616 65536 100001 31536000000 31536000001",
        ' ');
    size_t choice = pick(kNumbers.size() + 2);
    if (choice < kNumbers.size()) {
      out_ += kNumbers[choice];
      return;
    }
    if (choice == kNumbers.size()) out_ += '-';
    out_ += '1';
    for (size_t count = amount(); count > 0 && !full(); --count) out_ += '9';
  }

  // Up to 7 members, keys of the protocol or odd ones, values from the grammar.
  void object(int depth) {
    out_ += '{';
    for (size_t count = pick(8); count > 0 && !full(); --count) {
      any_key();
      value(depth + 1);
    }
    out_ += '}';
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string out_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  check_stream(data, size);
  // The same bytes as one payload, without framing: most inputs are not valid frames.
  check_message(std::string(reinterpret_cast<const char*>(data), size));
  // The same bytes as grammar choices, for as many messages as they last: a mutation anywhere in
  // the input changes one of them.
  JsonGrammar grammar(data, size);
  while (grammar.more()) {
    std::string generated = grammar.message();
    check_framed(generated);
    check_message(generated);
  }
  return 0;
}
