#include "engine/dist/event_relay.h"

#include <cstdio>
#include <memory>
#include <vector>

namespace sy::dist {
namespace {

constexpr std::int64_t kFlushNs = 20'000'000;

enum class Kind : std::uint8_t { Execution = 0, Merge = 1, Stall = 2, Transfer = 3, SharedExpert = 4 };

struct Event {
  Kind kind = Kind::Execution;
  std::int32_t device = 0;  // transfer: source
  std::int32_t other = 0;   // execution: layer kind; stall: reason; transfer: destination
  std::int32_t block = 0;
  std::int32_t index = 0;
  std::int32_t group = 0;
  std::int64_t tokens = 0;
  std::int64_t bytes = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
};

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
  ByteWriter w;
  w.put<std::uint8_t>(static_cast<std::uint8_t>(MessageType::Events));
  w.put<std::int32_t>(links_.rank());
  w.put<std::uint32_t>(run_);
  w.put<std::uint32_t>(count_);
  w.put_raw(batch_.bytes().data(), batch_.bytes().size());
  links_.send(0, w.bytes());
  batch_.bytes().clear();
  count_ = 0;
}

void EventRelay::on_execution(std::int32_t device, LayerKind kind, std::int32_t block, std::int32_t index,
                              std::int32_t group, std::int64_t tokens, std::int64_t start_ns, std::int64_t end_ns) {
  batch_.put<std::uint8_t>(static_cast<std::uint8_t>(Kind::Execution));
  batch_.put<std::int32_t>(device);
  batch_.put<std::int32_t>(static_cast<std::int32_t>(kind));
  batch_.put<std::int32_t>(block);
  batch_.put<std::int32_t>(index);
  batch_.put<std::int32_t>(group);
  batch_.put<std::int64_t>(tokens);
  batch_.put<std::int64_t>(on_rank0(start_ns));
  batch_.put<std::int64_t>(on_rank0(end_ns));
  ++count_;
}

void EventRelay::on_merge(std::int32_t device, std::int32_t block, std::int64_t tokens, std::int64_t start_ns,
                          std::int64_t end_ns) {
  batch_.put<std::uint8_t>(static_cast<std::uint8_t>(Kind::Merge));
  batch_.put<std::int32_t>(device);
  batch_.put<std::int32_t>(block);
  batch_.put<std::int64_t>(tokens);
  batch_.put<std::int64_t>(on_rank0(start_ns));
  batch_.put<std::int64_t>(on_rank0(end_ns));
  ++count_;
}

void EventRelay::on_shared_expert(std::int32_t device, std::int32_t block, std::int32_t group, std::int64_t tokens,
                                  std::int64_t start_ns, std::int64_t end_ns) {
  batch_.put<std::uint8_t>(static_cast<std::uint8_t>(Kind::SharedExpert));
  batch_.put<std::int32_t>(device);
  batch_.put<std::int32_t>(block);
  batch_.put<std::int32_t>(group);
  batch_.put<std::int64_t>(tokens);
  batch_.put<std::int64_t>(on_rank0(start_ns));
  batch_.put<std::int64_t>(on_rank0(end_ns));
  ++count_;
}

void EventRelay::on_stall(std::int32_t device, StallReason reason, std::int64_t start_ns, std::int64_t end_ns) {
  batch_.put<std::uint8_t>(static_cast<std::uint8_t>(Kind::Stall));
  batch_.put<std::int32_t>(device);
  batch_.put<std::int32_t>(static_cast<std::int32_t>(reason));
  batch_.put<std::int64_t>(on_rank0(start_ns));
  batch_.put<std::int64_t>(on_rank0(end_ns));
  ++count_;
}

void EventRelay::on_transfer(std::int32_t src, std::int32_t dst, std::int64_t tokens, std::int64_t bytes,
                             std::int64_t start_ns, std::int64_t end_ns) {
  batch_.put<std::uint8_t>(static_cast<std::uint8_t>(Kind::Transfer));
  batch_.put<std::int32_t>(src);
  batch_.put<std::int32_t>(dst);
  batch_.put<std::int64_t>(tokens);
  batch_.put<std::int64_t>(bytes);
  batch_.put<std::int64_t>(on_rank0(start_ns));
  batch_.put<std::int64_t>(on_rank0(end_ns));
  ++count_;
}

namespace {

// Whether rank `rank`'s event names what it runs and what the deployment has: the observers
// index their tables by these numbers.
bool plausible(const Event& e, std::int32_t rank, const Topology& t) {
  const auto device_of_rank = [&](std::int32_t d) { return d >= 0 && d < t.num_devices && t.process_of(d) == rank; };
  const auto block = [&](std::int32_t b) { return b >= 0 && b < t.num_blocks; };
  if (!device_of_rank(e.device) || e.tokens < 0) return false;
  switch (e.kind) {
    case Kind::Execution:
      switch (static_cast<LayerKind>(e.other)) {
        case LayerKind::Expert: return block(e.block) && e.index >= -1 && e.index < t.num_experts;
        case LayerKind::Attention: return block(e.block) && e.index >= 0 && e.index < t.num_ranks();
        case LayerKind::Sampler: return e.block == t.num_blocks && e.index >= 0 && e.index < t.num_ranks();
      }
      return false;
    case Kind::Merge:
    case Kind::SharedExpert: return block(e.block);
    case Kind::Stall: return e.other >= 0 && e.other <= static_cast<std::int32_t>(StallReason::Weights);
    case Kind::Transfer: return e.other >= 0 && e.other < t.num_devices && e.bytes >= 0;
  }
  return false;
}

}  // namespace

void receive_relayed_events(ProcessLinks& links, EventLoop& loop, RuntimeObserver& observer, std::uint32_t run,
                            const Topology& topology) {
  links.on(MessageType::Events, [&links, &loop, &observer, run, &topology](ByteReader& r) {
    std::int32_t rank = 0;
    std::uint32_t of_run = 0, n = 0;
    if (!r.get(rank).ok() || !r.get(of_run).ok() || of_run != run || !r.get(n).ok() || n > r.left()) return;
    auto events = std::make_shared<std::vector<Event>>(n);
    for (Event& e : *events) {
      std::uint8_t kind = 0;
      Status s = r.get(kind);
      e.kind = static_cast<Kind>(kind);
      switch (e.kind) {
        case Kind::Execution:
          if (s.ok()) s = r.get(e.device);
          if (s.ok()) s = r.get(e.other);
          if (s.ok()) s = r.get(e.block);
          if (s.ok()) s = r.get(e.index);
          if (s.ok()) s = r.get(e.group);
          if (s.ok()) s = r.get(e.tokens);
          break;
        case Kind::Merge:
          if (s.ok()) s = r.get(e.device);
          if (s.ok()) s = r.get(e.block);
          if (s.ok()) s = r.get(e.tokens);
          break;
        case Kind::SharedExpert:
          if (s.ok()) s = r.get(e.device);
          if (s.ok()) s = r.get(e.block);
          if (s.ok()) s = r.get(e.group);
          if (s.ok()) s = r.get(e.tokens);
          break;
        case Kind::Stall:
          if (s.ok()) s = r.get(e.device);
          if (s.ok()) s = r.get(e.other);
          break;
        case Kind::Transfer:
          if (s.ok()) s = r.get(e.device);
          if (s.ok()) s = r.get(e.other);
          if (s.ok()) s = r.get(e.tokens);
          if (s.ok()) s = r.get(e.bytes);
          break;
        default: return;  // a foreign record: drop the batch
      }
      if (s.ok()) s = r.get(e.start);
      if (s.ok()) s = r.get(e.end);
      if (!s.ok()) return;
      if (rank <= 0 || rank >= links.world() || !plausible(e, rank, topology)) {
        std::fprintf(stderr, "switchyard: rank 0: dropped a batch of events from rank %d naming a device, block, "
                     "layer or reason it does not have\n", rank);
        return;
      }
    }
    loop.post_external([&observer, events] {
      for (const Event& e : *events) {
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
