// What the runtime reports as it runs: executions, stalls and transfers per device. Metrics
// and (later) telemetry implement it; the runtime never depends on either.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/runtime/layer_id.h"

namespace sy {

// Weights: the coordinator holds rows back while a placement whose weights have been copied
// switches in (the drain to its safe point); the device idles for the weights to change.
enum class StallReason : std::uint8_t { QueueEmpty, Barrier, Transfer, Weights };
std::string_view stall_reason_name(StallReason reason);

class RuntimeObserver {
 public:
  virtual ~RuntimeObserver() = default;
  // One execution on a device of `tokens` rows (the sampler's: the tokens it sampled, one per
  // sequence). index: the attention rank, the expert (-1 when a grouped execution ran several
  // experts of the block), or the rank for the sampler.
  virtual void on_execution(std::int32_t /*device*/, LayerKind /*kind*/, std::int32_t /*block*/,
                            std::int32_t /*index*/, std::int32_t /*group*/, std::int64_t /*tokens*/,
                            std::int64_t /*start_ns*/, std::int64_t /*end_ns*/) {}
  // The token pool's merge of `tokens` rows whose expert outputs of `block` were all back.
  virtual void on_merge(std::int32_t /*device*/, std::int32_t /*block*/, std::int64_t /*tokens*/,
                        std::int64_t /*start_ns*/, std::int64_t /*end_ns*/) {}
  // findep: the shared expert of `block` over `tokens` rows of micro-batch `group`, as an
  // execution of its own on the attention device.
  virtual void on_shared_expert(std::int32_t /*device*/, std::int32_t /*block*/, std::int32_t /*group*/,
                                std::int64_t /*tokens*/, std::int64_t /*start_ns*/, std::int64_t /*end_ns*/) {}
  virtual void on_stall(std::int32_t /*device*/, StallReason /*reason*/, std::int64_t /*start_ns*/,
                        std::int64_t /*end_ns*/) {}
  // The attention side of `block` sent `tokens` rows to `expert` on `device` (expert load).
  virtual void on_routed(std::int32_t /*block*/, std::int32_t /*expert*/, std::int32_t /*device*/,
                         std::int64_t /*tokens*/, std::int64_t /*at_ns*/) {}
  // A shipment between two devices: its bytes start leaving at start_ns (once the ports are
  // free) and have all arrived at end_ns.
  virtual void on_transfer(std::int32_t /*src*/, std::int32_t /*dst*/, std::int64_t /*tokens*/,
                           std::int64_t /*bytes*/, std::int64_t /*start_ns*/, std::int64_t /*end_ns*/) {}
  // The weights of (block, expert), `bytes` of them, were copied to `device` from device
  // `source` (-1: from host memory) between start_ns and end_ns: a placement change's copy.
  virtual void on_weight_fetch(std::int32_t /*device*/, std::int32_t /*source*/, std::int32_t /*block*/,
                               std::int32_t /*expert*/, std::int64_t /*bytes*/, std::int64_t /*start_ns*/,
                               std::int64_t /*end_ns*/) {}
  // An execution took `tokens` rows from a μ-queue of `device` at at_ns; the oldest of them
  // had waited `waited_ns` there (head-of-line queueing delay: where async loses time).
  virtual void on_queue_wait(std::int32_t /*device*/, const LayerId& /*queue*/, std::int64_t /*tokens*/,
                             std::int64_t /*waited_ns*/, std::int64_t /*at_ns*/) {}
};

}  // namespace sy
