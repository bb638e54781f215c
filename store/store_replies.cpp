#include "store/store_replies.hpp"

namespace cohort {

std::string& StoreReplies::add(StoreConnectionId connection) {
  if (used_ == entries_.size()) entries_.emplace_back();
  StoreReply& reply = entries_[used_++];
  reply.connection = connection;
  reply.bytes.clear();
  return reply.bytes;
}

void StoreReplies::clear() {
  for (size_t i = 0; i < used_; ++i) {
    std::string& bytes = entries_[i].bytes;
    bytes.clear();
    if (bytes.capacity() > kKeptBytes) std::string().swap(bytes);
  }
  used_ = 0;
  if (entries_.size() > kKeptReplies) {
    entries_.resize(kKeptReplies);
    entries_.shrink_to_fit();
  }
}

}  // namespace cohort
