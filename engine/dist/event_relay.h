// One view of the cluster from rank 0: the runtime events of the other ranks' devices
// (executions, merges, stalls, transfers) travel to rank 0 in batches every 20 ms, with their
// times moved onto rank 0's clock by the offset the heartbeats measure, and rank 0 feeds them
// to its own observers (metrics, telemetry) as if its devices had reported them. Device ids
// are the deployment's, global already.
#pragma once

#include <cstdint>

#include "engine/dist/event_batch.h"
#include "engine/dist/process_links.h"
#include "engine/runtime/event_loop.h"
#include "engine/runtime/runtime_observer.h"
#include "engine/runtime/topology.h"

namespace sy::dist {

// On a rank other than 0: observes this rank's devices and sends what it saw to rank 0.
class EventRelay final : public RuntimeObserver {
 public:
  // `open` says whether the run still goes on (the relay stops re-arming its timer after);
  // `run` numbers the deployments served on these links, so that rank 0 drops a late batch of
  // an earlier one.
  EventRelay(ProcessLinks& links, EventLoop& loop, const bool& open, std::uint32_t run);
  // Sends what is buffered (on the loop).
  void flush();

  void on_execution(std::int32_t device, LayerKind kind, std::int32_t block, std::int32_t index, std::int32_t group,
                    std::int64_t tokens, std::int64_t start_ns, std::int64_t end_ns) override;
  void on_shared_expert(std::int32_t device, std::int32_t block, std::int32_t group, std::int64_t tokens,
                        std::int64_t start_ns, std::int64_t end_ns) override;
  void on_merge(std::int32_t device, std::int32_t block, std::int64_t tokens, std::int64_t start_ns,
                std::int64_t end_ns) override;
  void on_stall(std::int32_t device, StallReason reason, std::int64_t start_ns, std::int64_t end_ns) override;
  void on_transfer(std::int32_t src, std::int32_t dst, std::int64_t tokens, std::int64_t bytes, std::int64_t start_ns,
                   std::int64_t end_ns) override;

 private:
  void tick();
  void add(const RelayedEvent& e);
  std::int64_t on_rank0(std::int64_t t) const { return t + offset_.offset_ns; }

  ProcessLinks& links_;
  EventLoop& loop_;
  const bool& open_;
  std::uint32_t run_;
  ProcessLinks::Offset offset_;
  ByteWriter batch_;
  std::uint32_t count_ = 0;
};

// On rank 0: decodes the other ranks' batches (receiver thread) and replays them on `loop`
// into `observer`. Registers its handler on `links` (before links.start()). A batch with an
// event that names a device of another rank, or a block, layer or stall reason `topology` does
// not have, is dropped (the observers index their tables by them). `topology` must outlive it.
void receive_relayed_events(ProcessLinks& links, EventLoop& loop, RuntimeObserver& observer, std::uint32_t run,
                            const Topology& topology);

}  // namespace sy::dist
