#include "common/gate_keeper.hpp"

namespace cohort {

GateKeeper::GateKeeper(ConnectionLimits limits, Clock& clock, Evict evict, Start start)
    : gate_(limits),
      clock_(clock),
      evict_(std::move(evict)),
      start_(std::move(start)),
      wake_(clock.make_timer()) {}

Admission GateKeeper::admit(uint64_t id, const std::string& address) {
  return gate_.admit(id, address, clock_.now());
}

// An eviction or a start may close other connections at once; their closes only free room, which
// the next pump hands out.
void GateKeeper::let_in(Admission admission) {
  if (closed_) return;
  letting_in_ = true;
  for (;;) {
    for (uint64_t id : admission.evict) evict_(id, admission.why);
    for (uint64_t id : admission.start) start_(id);
    admission = gate_.pump(clock_.now());
    if (admission.evict.empty() && admission.start.empty()) break;
  }
  letting_in_ = false;
  if (auto at = gate_.next_pump(clock_.now())) {
    wake_->start_at(*at, [this] { pump(); });
  } else {
    wake_->cancel();
  }
}

void GateKeeper::proven(uint64_t id) {
  gate_.proven(id);
  pump();
}

void GateKeeper::ready(uint64_t id) {
  gate_.ready(id);
  pump();
}

void GateKeeper::closed(uint64_t id) {
  gate_.closed(id);
  pump();
}

void GateKeeper::close() {
  closed_ = true;
  wake_->cancel();
}

void GateKeeper::pump() {
  if (letting_in_ || closed_) return;
  let_in(gate_.pump(clock_.now()));
}

}  // namespace cohort
