// One worker's telemetry outlet: pushes records into lock-free rings that the hub's publisher
// thread drains. Allocation-free and wait-free; a full ring drops the record and counts it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "telemetry/events.h"
#include "telemetry/spsc_ring.h"

namespace sy::telemetry {

// Ring sizes per producer, in records. At the default 10 ms drain interval a worker may emit
// about 100× these per second before anything is dropped.
struct RingCapacities {
  std::size_t spans = 8192;
  std::size_t queues = 8192;
  std::size_t loads = 4096;
  std::size_t requests = 4096;
};

class Producer {
 public:
  Producer(std::string name, const RingCapacities& capacities)
      : name_(std::move(name)),
        spans_(capacities.spans),
        queues_(capacities.queues),
        loads_(capacities.loads),
        requests_(capacities.requests) {}
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Call from the producer's one thread only. False when the record was dropped (ring full).
  bool span(const Span& record) noexcept { return spans_.push(record); }
  bool queue(const QueueSample& record) noexcept { return queues_.push(record); }
  bool load(const ExpertLoad& record) noexcept { return loads_.push(record); }
  bool request(const RequestEvent& record) noexcept { return requests_.push(record); }

  const std::string& name() const { return name_; }
  // Records dropped so far because a ring was full (any thread).
  std::uint64_t dropped() const {
    return spans_.dropped() + queues_.dropped() + loads_.dropped() + requests_.dropped();
  }

 private:
  friend class TelemetryHub;
  std::string name_;
  SpscRing<Span> spans_;
  SpscRing<QueueSample> queues_;
  SpscRing<ExpertLoad> loads_;
  SpscRing<RequestEvent> requests_;
};

}  // namespace sy::telemetry
