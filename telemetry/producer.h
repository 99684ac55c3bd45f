// One worker's telemetry outlet: pushes records into lock-free rings that the hub's publisher
// thread drains. Allocation-free and wait-free; a full ring drops the record and counts it,
// unless the producer was told to wait (a virtual-clock run, where waiting costs no accuracy).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

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
  bool span(const Span& record) noexcept { return push(spans_, record); }
  bool queue(const QueueSample& record) noexcept { return push(queues_, record); }
  bool load(const ExpertLoad& record) noexcept { return push(loads_, record); }
  bool request(const RequestEvent& record) noexcept { return push(requests_, record); }

  // With a limit > 0, a full ring makes the producer wait for the publisher to drain it, up to
  // `limit` per record, before it drops. For a virtual clock (the simulator), where a wait
  // slows the run but changes none of its times, so that an unpaced run's recording is whole;
  // never for a wall clock, whose workers must not wait for telemetry. The limit keeps a
  // stopped publisher from stalling the engine for good.
  void wait_when_full(std::chrono::microseconds limit) { wait_limit_ = limit; }

  const std::string& name() const { return name_; }
  // Records dropped so far because a ring was full (any thread).
  std::uint64_t dropped() const {
    return spans_.dropped() + queues_.dropped() + loads_.dropped() + requests_.dropped();
  }

 private:
  friend class TelemetryHub;
  template <class T>
  bool push(SpscRing<T>& ring, const T& record) noexcept {
    if (ring.try_push(record)) return true;
    if (wait_limit_.count() > 0) {
      // The publisher drains every few milliseconds: yield first, then sleep in short steps.
      const auto deadline = std::chrono::steady_clock::now() + wait_limit_;
      for (int spin = 0; std::chrono::steady_clock::now() < deadline; ++spin) {
        if (spin < 64)
          std::this_thread::yield();
        else
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        if (ring.try_push(record)) return true;
      }
    }
    return ring.push(record);  // drops and counts it when still full
  }

  std::chrono::microseconds wait_limit_{0};
  std::string name_;
  SpscRing<Span> spans_;
  SpscRing<QueueSample> queues_;
  SpscRing<ExpertLoad> loads_;
  SpscRing<RequestEvent> requests_;
};

}  // namespace sy::telemetry
