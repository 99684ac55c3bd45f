#include "engine/dist/event_relay.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

namespace sy::dist {
namespace {

constexpr std::int64_t kFlushNs = 20'000'000;

using Kind = RelayedEvent::Kind;

}  // namespace

EventRelay::EventRelay(ProcessLinks& links, EventLoop& loop, const bool& open, std::uint32_t run)
    : links_(links), loop_(loop), open_(open), run_(run) {
  loop_.post(loop_.now() + kFlushNs, [this] { tick(); });
}

void EventRelay::tick() {
  flush();
  if (open_) loop_.post(loop_.now() + kFlushNs, [this] { tick(); });
}

void EventRelay::flush() {
  links_.clock_offset(0, offset_);  // the best measurement so far, for the next batch
  if (count_ == 0) return;
  links_.send(0, encode_events(links_.rank(), run_, count_, batch_.bytes()));
  batch_.bytes().clear();
  count_ = 0;
}

void EventRelay::add(const RelayedEvent& e) {
  put_event(batch_, e);
  ++count_;
}

void EventRelay::on_execution(std::int32_t device, LayerKind kind, std::int32_t block, std::int32_t index,
                              std::int32_t group, std::int64_t tokens, std::int64_t start_ns, std::int64_t end_ns) {
  add({Kind::Execution, device, static_cast<std::int32_t>(kind), block, index, group, tokens, 0, on_rank0(start_ns),
       on_rank0(end_ns)});
}

void EventRelay::on_merge(std::int32_t device, std::int32_t block, std::int64_t tokens, std::int64_t start_ns,
                          std::int64_t end_ns) {
  add({Kind::Merge, device, 0, block, 0, 0, tokens, 0, on_rank0(start_ns), on_rank0(end_ns)});
}

void EventRelay::on_shared_expert(std::int32_t device, std::int32_t block, std::int32_t group, std::int64_t tokens,
                                  std::int64_t start_ns, std::int64_t end_ns) {
  add({Kind::SharedExpert, device, 0, block, 0, group, tokens, 0, on_rank0(start_ns), on_rank0(end_ns)});
}

void EventRelay::on_stall(std::int32_t device, StallReason reason, std::int64_t start_ns, std::int64_t end_ns) {
  add({Kind::Stall, device, static_cast<std::int32_t>(reason), 0, 0, 0, 0, 0, on_rank0(start_ns), on_rank0(end_ns)});
}

void EventRelay::on_transfer(std::int32_t src, std::int32_t dst, std::int64_t tokens, std::int64_t bytes,
                             std::int64_t start_ns, std::int64_t end_ns) {
  add({Kind::Transfer, src, dst, 0, 0, 0, tokens, bytes, on_rank0(start_ns), on_rank0(end_ns)});
}

void receive_relayed_events(ProcessLinks& links, EventLoop& loop, RuntimeObserver& observer, std::uint32_t run,
                            const Topology& topology) {
  links.on(MessageType::Events, [&links, &loop, &observer, run, &topology](ByteReader& r) {
    auto batch = std::make_shared<EventBatch>();
    if (const Status s = decode(r, *batch); !s.ok())
      return (void)std::fprintf(stderr, "switchyard: rank 0: dropped a malformed batch of events: %s\n",
                                s.message().c_str());
    if (batch->run != run) return;  // a late batch of an earlier deployment on these links
    const std::int32_t rank = batch->rank;
    const bool from_a_rank = rank > 0 && rank < links.world();
    if (!batch->events.empty() &&
        (!from_a_rank || !std::all_of(batch->events.begin(), batch->events.end(),
                                      [&](const RelayedEvent& e) { return plausible(e, rank, topology); })))
      return (void)std::fprintf(stderr, "switchyard: rank 0: dropped a batch of events from rank %d naming a "
                                "device, block, layer or reason it does not have\n", rank);
    loop.post_external([&observer, batch] {
      for (const RelayedEvent& e : batch->events) {
        switch (e.kind) {
          case Kind::Execution:
            observer.on_execution(e.device, static_cast<LayerKind>(e.other), e.block, e.index, e.group, e.tokens,
                                  e.start, e.end);
            break;
          case Kind::Merge: observer.on_merge(e.device, e.block, e.tokens, e.start, e.end); break;
          case Kind::SharedExpert:
            observer.on_shared_expert(e.device, e.block, e.group, e.tokens, e.start, e.end);
            break;
          case Kind::Stall: observer.on_stall(e.device, static_cast<StallReason>(e.other), e.start, e.end); break;
          case Kind::Transfer: observer.on_transfer(e.device, e.other, e.tokens, e.bytes, e.start, e.end); break;
        }
      }
    });
  });
}

}  // namespace sy::dist
