// libFuzzer target: arbitrary bytes, cut into chunks for up to four connections, go through the
// TCPStore decoder and the store. Checks that nothing crashes, leaks or allocates from a length
// prefix (scripts/fuzz runs it with a low -malloc_limit_mb), that every decoded request encodes
// back to bytes that decode to the same request, that replies go to known connections, and that
// nothing stays counted once every connection has closed and every key and queue item is gone:
// the store's quota count and the process-wide budget it shares both come back to zero.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/byte_budget.hpp"
#include "store/store.hpp"
#include "store/tcpstore_codec.hpp"

namespace {

using namespace cohort;

void require(bool condition) {
  if (!condition) std::abort();
}

// encode(decode(x)) must decode to the same request on a fresh connection of that numbering.
void check_round_trip(const StoreRequest& request, StoreNumbering numbering) {
  std::string wire;
  if (numbering == StoreNumbering::Validated && request.op != StoreOp::Validate) {
    require(append_request(wire, StoreRequest{StoreOp::Validate, {}, {}, kStoreValidateMagic},
                           numbering));
  }
  require(append_request(wire, request, numbering));
  TcpStoreDecoder decoder(numbering == StoreNumbering::Legacy21 ? numbering
                                                                : StoreNumbering::Legacy113);
  std::string_view rest = wire;
  StoreRequest last;
  while (!rest.empty()) {
    DecodeStep step = decoder.feed(rest);
    require(step.status == DecodeStatus::Request);
    rest.remove_prefix(step.consumed);
    last = decoder.take_request();
  }
  require(last == request);
  require(decoder.numbering() == numbering);
}

// Closes every connection, deletes every key and empties every queue the input named.
void drain(Store& store, size_t connections, const std::set<std::string>& keys) {
  for (size_t id = 0; id < connections; ++id) store.disconnect(id);
  require(store.waiting_connections() == 0);
  StoreReplies replies;
  for (const std::string& key : keys) {
    StoreRequest remove{StoreOp::DeleteKey, {key}, {}, 0};
    require(!store.apply(0, remove, replies).close_connection);
    while (store.queue_length(key) > 0) {
      StoreRequest pop{StoreOp::QueuePop, {key}, {}, 0};
      require(!store.apply(0, pop, replies).close_connection);
    }
    replies.clear();
  }
  require(store.num_keys() == 0);
  require(store.used_bytes() == 0 && store.held_bytes() == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  StoreNumbering legacy = (data[0] & 1) ? StoreNumbering::Legacy21 : StoreNumbering::Legacy113;
  size_t connections = 1 + ((data[0] >> 1) & 3);
  std::vector<std::unique_ptr<TcpStoreDecoder>> decoders;
  for (size_t i = 0; i < connections; ++i) {
    decoders.push_back(std::make_unique<TcpStoreDecoder>(legacy));
  }
  auto budget = std::make_shared<ByteBudget>(uint64_t{1} << 40);
  auto store_owner = std::make_unique<Store>(StoreLimits{}, budget);
  Store& store = *store_owner;
  StoreReplies replies;
  std::set<std::string> keys;  // every key a request named
  size_t pos = 1;
  // Each chunk: a header byte (connection in the low 2 bits, length 1..64 in the high 6 bits,
  // 0 meaning "this connection disconnects"), then that many bytes of the stream.
  while (pos < size) {
    uint8_t header = data[pos++];
    StoreConnectionId id = (header & 3) % connections;
    size_t length = header >> 2;
    if (length == 0) {
      store.disconnect(id);
      decoders[id] = std::make_unique<TcpStoreDecoder>(legacy);
      continue;
    }
    std::string_view chunk(reinterpret_cast<const char*>(data + pos), std::min(length, size - pos));
    pos += chunk.size();
    TcpStoreDecoder& decoder = *decoders[id];
    while (true) {
      DecodeStep step = decoder.feed(chunk);
      require(step.consumed <= chunk.size());
      chunk.remove_prefix(step.consumed);
      if (step.status == DecodeStatus::NeedMore) {
        require(chunk.empty());
        break;
      }
      if (step.status == DecodeStatus::Error) {  // the server closes this connection
        require(!decoder.error().empty());
        store.disconnect(id);
        decoders[id] = std::make_unique<TcpStoreDecoder>(legacy);
        break;
      }
      // Applied in place, as the server does: the store takes or swaps the request's strings,
      // and the decoder reuses them for the next one.
      StoreRequest& request = decoder.request();
      check_round_trip(request, *decoder.numbering());
      keys.insert(request.keys.begin(), request.keys.end());
      replies.clear();
      StoreOutcome outcome = store.apply(id, request, replies);
      decoder.recycle_request();
      for (const auto& reply : replies) {
        require(reply.connection < connections);
        require(!reply.bytes.empty());
      }
      if (outcome.close_connection) {
        store.disconnect(id);
        decoders[id] = std::make_unique<TcpStoreDecoder>(legacy);
        break;
      }
    }
    require(store.waiting_connections() <= connections);
  }
  drain(store, connections, keys);
  store_owner.reset();
  require(budget->used() == 0);
  return 0;
}
